"""Starting ranks. `local` runs one process per accelerator on this machine; the scale-out issue
adds a Ray launcher beside it. Nothing else knows how ranks are started."""
