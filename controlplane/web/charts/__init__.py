"""Pictures the pages draw on the server as SVG (no script, no library; the CSP stays strict): spend and
decisions per day, each cap's spend over its window with the cap drawn, held-request wait times, and a
run's spend and decisions over its life. Names and reasons are escaped; nothing a box wrote is drawn."""

from controlplane.web.charts.overview import cap_charts, decisions_chart, spend_chart, wait_chart
from controlplane.web.charts.run import run_decisions_chart, run_spend_charts
from controlplane.web.charts.svg import Chart

__all__ = ["Chart", "cap_charts", "decisions_chart", "run_decisions_chart", "run_spend_charts", "spend_chart",
           "wait_chart"]
