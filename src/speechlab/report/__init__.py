"""Reporting: paper-shaped result tables and figures per run, one HTML report over runs.

``speechlab.report.plots`` (matplotlib) is imported on demand so that saving results does not
load a plotting library.
"""

from speechlab.report.html import write_report
from speechlab.report.results import Figure, Results, Table, collect_meta

__all__ = ["Figure", "Results", "Table", "collect_meta", "write_report"]
