"""Reports of runs: charts (PNG + SVG), a self-contained HTML page and a Markdown summary."""
