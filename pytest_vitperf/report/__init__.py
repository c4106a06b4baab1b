"""Telling: the summary's tables and messages, the report's figures, and the files CI dashboards read. Nothing here
decides anything."""
