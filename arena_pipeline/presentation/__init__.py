"""What users see: the read API over the published views, charts, Markdown previews and the HTML report."""
