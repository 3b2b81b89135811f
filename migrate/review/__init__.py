"""Reports for code review: findings as SARIF 2.1.0 (sarif.py, for code scanning), and the
conversion as a GitHub pull-request review whose suggestions, all applied, give what `--write`
writes (github_review.py, over the changed line ranges of hunks.py, each with a reason from
why.py). Plain data in, JSON-ready dicts out: nothing here reads files or imports libcst.
"""
