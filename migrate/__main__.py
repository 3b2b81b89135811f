"""`python -m migrate` runs the command line."""

from migrate.cli import main

main()
