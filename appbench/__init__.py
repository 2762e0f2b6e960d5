"""The app's benchmarks, measured from outside as a visitor meets the app: `page` (start → ready,
click → first stage; the started app, free port and Chromium flags the others share), `load`
(`bench-app --users`), `soak` (`hoptrace soak`), `first_start` (`bench-app --first-start`) and
`hopmap` (`bench-app --hop-maps`). They drive the app, so they sit above `ui/` and beside the CLI
that runs them; nothing in the app imports them."""
