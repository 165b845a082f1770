"""Results into text: terminal tables, GitHub Markdown, CSV, model cards (estimators return data; only this package formats it)."""
