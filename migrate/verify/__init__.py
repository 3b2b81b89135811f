"""`migrate verify`: proof on the user's own script.

The script is converted into a temporary copy of its folder; the original runs as one process and
the converted script under the target's launcher, each under `runner.py`, which records through
torch's global hooks what every rank does; `checks.py` turns the records into a verdict; the CLI
prints it (text, markdown, json). Nothing here edits the user's files.
"""
