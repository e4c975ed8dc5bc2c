"""A plugin module whose import raises (a bug in the plugin)."""

raise RuntimeError("hg_demo_plugin.raises exploded on import")
