"""`adlnmt experiment`: grids of variants × seeds. ``grid`` reads and checks a grid file (``schema`` holds the
located YAML checks), ``runner`` prepares the data and runs every (variant, seed) in its own ``worker`` process,
``report`` and ``plots`` turn the finished runs into tables, figures and report.md; ``commands`` is the CLI."""
