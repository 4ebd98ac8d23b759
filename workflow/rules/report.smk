# Stage 7: `snakemake --report results/report.html` collects every output marked with report()
# (tables and figures above, captions in workflow/report/), grouped by experiment.

report: "../report/workflow.rst"
