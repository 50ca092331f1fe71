"""How well `hitl_tui.loops.similarity` tells a question asked again from another question.

Reads the labelled pairs of tests/data/similar_pairs.json and prints, for each threshold,
precision, recall and F1 of `similar.score` (and of plain Jaccard and plain containment over
the same tokens, for comparison), then the threshold the module uses and its figures. The
figures in similar.py's docstring come from this script.

    .venv/bin/python bench/similarity.py            # the table
    .venv/bin/python bench/similarity.py --misses   # and the pairs the chosen threshold gets wrong

Plain Jaccard peaks at F1 0.92 (0.35-0.40), plain containment at 0.97 (0.70) on this set, but
containment alone makes "Which port?" similar to every question about a port.
Wrong at 0.55 (`--misses`): one false alarm, a question sharing its subject and verb with
another (0.69: "retry the payment webhook" / "log the payment webhook body"); two misses, a
re-ask worded wholly anew (0.40) and one just under (0.549, markup words around it).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path

from hitl_tui.loops import similarity as similar

PAIRS = Path(__file__).resolve().parent.parent / "tests" / "data" / "similar_pairs.json"
THRESHOLDS = [round(0.25 + 0.05 * i, 2) for i in range(13)]


def load() -> list[dict]:
    return json.loads(PAIRS.read_text(encoding="utf-8"))["pairs"]


def jaccard(a: str, b: str) -> float:
    ta, tb = similar.tokens(a), similar.tokens(b)
    return len(ta & tb) / len(ta | tb) if ta and tb else 0.0


def containment(a: str, b: str) -> float:
    ta, tb = similar.tokens(a), similar.tokens(b)
    return len(ta & tb) / min(len(ta), len(tb)) if ta and tb else 0.0


def figures(pairs: list[dict], score: Callable[[str, str], float], threshold: float):
    """(precision, recall, F1, true positives, false positives, false negatives)."""
    tp = fp = fn = 0
    for pair in pairs:
        said = score(pair["a"], pair["b"]) >= threshold
        tp += said and pair["similar"]
        fp += said and not pair["similar"]
        fn += (not said) and pair["similar"]
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn) if tp + fn else 1.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1, tp, fp, fn


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--misses", action="store_true", help="list the pairs judged wrong")
    args = parser.parse_args()
    pairs = load()
    positives = sum(p["similar"] for p in pairs)
    print(f"{len(pairs)} pairs: {positives} similar, {len(pairs) - positives} not\n")
    scores = {"similar.score": similar.score, "jaccard": jaccard, "containment": containment}
    print("threshold  " + "  ".join(f"{name:>24}" for name in scores))
    print("           " + "  ".join(f"{'P     R     F1':>24}" for _ in scores))
    for threshold in THRESHOLDS:
        cells = []
        for score in scores.values():
            p, r, f1, *_ = figures(pairs, score, threshold)
            cells.append(f"{p:.2f}  {r:.2f}  {f1:.2f}".rjust(24))
        print(f"{threshold:<9.2f}  " + "  ".join(cells))
    p, r, f1, tp, fp, fn = figures(pairs, similar.score, similar.THRESHOLD)
    print(
        f"\nchosen: similar.score >= {similar.THRESHOLD}: precision {p:.2f}, recall {r:.2f}, "
        f"F1 {f1:.2f} ({tp} right, {fp} false alarms, {fn} missed)"
    )
    if args.misses:
        for pair in pairs:
            value = similar.score(pair["a"], pair["b"])
            if (value >= similar.THRESHOLD) != pair["similar"]:
                label = "missed" if pair["similar"] else "false alarm"
                print(f"  {label} {value:.2f}: {pair['a']!r} / {pair['b']!r}")


if __name__ == "__main__":
    main()
