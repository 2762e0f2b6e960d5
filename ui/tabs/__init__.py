"""The app's tabs, one module each: `layout(shell)` makes the tab's components, `wire(shell)` its
handlers, once every tab exists (a handler may update another tab). ui/app.py assembles them."""
