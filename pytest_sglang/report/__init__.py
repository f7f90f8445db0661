"""Reports: records -> terminal summary, JSON (schemas/report.schema.json), Markdown, baselines, HTML.

Entry points for the plugin: :class:`pytest_sglang.plugin.report_session.ReportSession` and
:func:`pytest_sglang.plugin.report_session.baseline_outcome`. Everything renders one report dict
(:func:`pytest_sglang.report.json_report.build_report`), so the CLI can re-render saved reports.
"""
