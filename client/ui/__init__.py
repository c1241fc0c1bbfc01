"""`mentectl ui`: a local page over the daemon -- rules, activity, whether rules are kept, health.

Layout, and which way the imports point:

- `data`: what the page shows, asked of the daemon with the socket requests mentectl
  makes (`mented_client.connection`), as plain JSON-able values; the rule verbs run
  as `mentectl rule ...` itself (`run_mentectl`), so the page validates and says
  what the command line says. Standard library and mented only.
- `guard`: the safety of a local server on a shared machine, as one ASGI
  middleware: the secret token (then an HttpOnly SameSite=Strict cookie), the
  `Host` (DNS rebinding), `Origin` on POST, the security headers (strict CSP).
- `app`: the Starlette application (`make_app`) over both; `serve` runs it with
  uvicorn on 127.0.0.1 until Ctrl-C or until the page has been closed a while.
- `static/`: the page, hand-written vanilla JS and CSS, shipped in the package:
  nothing is fetched from a network. Every text from rules, files and events is
  put in the page with `textContent`, never as HTML.

Starlette and uvicorn come with the optional extra `pip install 'mented[ui]'`;
`mentectl` imports this package for the `ui` verb only (the daemon and the hook never).
"""
