from gpugov.cli import main

raise SystemExit(main())
