"""The bottom layer every other part may import: errors with readable paragraphs, plug-in name tables, the strict
schema base. It imports nothing of the project's own."""
