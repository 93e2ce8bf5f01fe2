"""Generic presentation: cells, tables and sections, markdown, HTML and the console, plot
primitives. It knows no feature: features hand it their sections and figures."""
