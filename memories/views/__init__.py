"""The /v1 ops, one view each, grouped by what they do: `base` (what every op shares), `writes`, `reads`, `search`,
`admin`."""
