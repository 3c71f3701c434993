"""Multi-core scheduling of a model's layers (issue 12, the multi-core paper §2-§3).

``run`` builds the model's DAG (generated manifest, per-layer WCETs from
``assay wcet``) and schedules it with ``harness.scheduling`` into
``schedule.json``; ``report`` draws the Gantt chart and the HTML page;
``command`` adds ``assay schedule``.
"""
