"""The ground floor: rules every layer shares (data directory and collection names, normalization, locks,
thread rules, vector checks, SQLite and settings error translation) and the plugin registry. Imports only the
vocabulary (errors, types, ports, settings) and the standard library, numpy and filelock."""
