"""The report's content as JSON, CSV and Markdown: the same tables the HTML page shows.

* JSON: ``{"title", "generated_utc", "runs", "tables", "series", "notes", "traffic"}``;
  undefined figures are ``null``; ``tables["comparison"]`` holds the four verdicts.
* CSV: one long table, ``section,run,target,scenario,field,value``, one line per figure (the
  chart points of ``series`` included), so any spreadsheet can pivot it.
* Markdown: one table per section and each run's configuration as a JSON block; chart points
  are counted, not listed.
"""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from ._format import cell
from ._read import Report, Row

KEYS = ("run", "target", "scenario")


def render_json(report: Report) -> str:
    data = {
        "title": report.title,
        "generated_utc": report.generated_utc,
        "runs": report.runs,
        "tables": report.tables,
        "series": report.series,
        "notes": report.notes,
        "traffic": report.traffic,
    }
    if report.advice is not None:
        data["advice"] = report.advice
    return json.dumps(data, indent=2, default=str) + "\n"


def _long_rows(section: str, row: Row) -> list[list[Any]]:
    key = [row.get(k, "") for k in KEYS]
    out = []
    for field, value in row.items():
        if field in KEYS:
            continue
        values = value if isinstance(value, list) else [value]
        for i, v in enumerate(values):
            name = f"{field}[{i}]" if isinstance(value, list) else field
            out.append([section, *key, name, "" if v is None else v])
    return out


def render_csv(report: Report) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["section", *KEYS, "field", "value"])
    for run in report.runs:
        meta = {k: v for k, v in run.items() if k != "config"}
        meta["config"] = json.dumps(run["config"], sort_keys=True, default=str)
        for rows in _long_rows("run", meta):
            writer.writerow(rows)
    for groups in (report.tables, report.series):
        for section, table_rows in groups.items():
            for row in table_rows:
                writer.writerows(_long_rows(section, row))
    for note in report.notes:
        writer.writerow(["note", "", "", "", "text", note])
    return buf.getvalue()


def _md_table(rows: list[Row]) -> str:
    if not rows:
        return "none\n"
    cols = list(rows[0])
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        cells = [cell(r.get(c), c).replace("|", "\\|") for c in cols]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def render_markdown(report: Report) -> str:
    parts = [f"# {report.title}\n", f"generated {report.generated_utc} by gpubench\n"]
    parts += [f"> {n}\n" for n in report.notes]
    for row in report.tables.get("comparison", []):
        parts.append(f"* **{row['question'].replace('_', ' ')}**: {row['verdict']}\n")
    for section, rows in report.tables.items():
        parts.append(f"## {section.replace('_', ' ')}\n")
        parts.append(_md_table(rows))
    for section, series in report.series.items():
        points = sum(
            max((len(v) for v in s.values() if isinstance(v, list)), default=1) for s in series
        )
        parts.append(f"Chart data `{section}`: {points} points (in the JSON and CSV formats).\n")
    parts.append("## runs and configuration\n")
    meta = [{k: v for k, v in r.items() if k not in ("config", "targets", "scenarios")}
            for r in report.runs]  # fmt: skip
    parts.append(_md_table(meta))
    for r in report.runs:
        text = json.dumps(r["config"], indent=2, sort_keys=True, default=str)
        parts.append(f"### run {r['run']} configuration\n\n```json\n{text}\n```\n")
    return "\n".join(parts)
