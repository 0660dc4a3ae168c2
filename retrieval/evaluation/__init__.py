"""Evaluation: an operator's labelled questions searched under configurations, measured and kept over time.

`sets` stores question sets (versioned uploads), `runs` searches every question under each configuration through
the same `search()` as REST and stores what each answered, `metrics` turns those answers into recall, MRR, hit,
abstain and latency with bootstrap intervals and the wins and losses between two configurations, and `schedule`
re-runs sets and names a drop beyond the interval. It sits above `search`: it only reads through it.
"""
