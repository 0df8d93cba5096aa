"""The report pages' one stylesheet, shared by the full report (``_html``) and the standalone
advice page (``_advise``), inlined in each page so that it works from a file:// URL."""

CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:2rem auto;max-width:1100px;color:#1d1f23;
padding:0 1rem}
h1{font-size:1.5rem}h2{font-size:1.2rem;margin-top:2.2rem;border-bottom:1px solid #ddd}
h3{font-size:1rem;margin-bottom:.2rem}table{border-collapse:collapse;margin:.6rem 0;font-size:12px}
th,td{border:1px solid #d6d8dc;padding:3px 6px;text-align:right}td{white-space:nowrap}
th{background:#f3f4f6;font-weight:600;vertical-align:bottom}
td:first-child,th:first-child,.l{text-align:left}
.scroll{overflow-x:auto;max-width:100%}figure{margin:.6rem 0 1rem}
figure svg{max-width:100%;height:auto}figcaption{color:#555;font-size:12px}
pre{background:#f6f7f9;padding:.8rem;overflow-x:auto;font-size:12px}.note{color:#8a5a00}
.verdict{font-weight:600;margin:.2rem 0 .4rem}.verdict.not-significant{color:#5a5f68}
.verdict.none{font-weight:400;color:#5a5f68}ul.review li{margin:.2rem 0}
"""
