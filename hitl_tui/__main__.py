from hitl_tui.cli import main

raise SystemExit(main())
