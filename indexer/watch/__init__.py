"""Live sync (a front end over the facade): watchdog events -> settled batches -> the writer's ``sync_paths``."""

from indexer.watch.watcher import Watcher, WatchOptions, WatchTarget

__all__ = ["WatchOptions", "WatchTarget", "Watcher"]
