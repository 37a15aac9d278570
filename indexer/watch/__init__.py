"""Live sync (a front end over the facade): watchdog events -> settled batches -> ``Collection.sync_paths``."""

from indexer.watch.watcher import Watcher, start_watcher

__all__ = ["Watcher", "start_watcher"]
