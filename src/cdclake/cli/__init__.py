"""The ``cdclake`` command-line tool."""
