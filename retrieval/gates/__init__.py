"""The similarity gates a search and a write judge by: calibrated per embedder (`calibration`, over
`probe_corpora`), raised by a namespace's measured noise (`noise`), resolved for one search (`thresholds`).
May import `providers`, `store` and `language`."""
