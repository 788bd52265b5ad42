from evopolicy_mcp.cli import main

raise SystemExit(main())
