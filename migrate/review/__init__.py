"""Reports for code review: findings as SARIF 2.1.0 (sarif.py, for code scanning; the caller gives
the rules, MIG or `migrate check`'s DC codes), the conversion as a GitHub pull-request review whose
suggestions, all applied, give what `--write` writes (github_review.py), and as a pull-request
description (description.py), both over the changed line ranges of hunks.py, each with a reason
from why.py. Plain data in, JSON-ready dicts or markdown out: nothing here imports libcst, and the
only file read is the verify JSON a description is given (description.read_verify_report).
"""
