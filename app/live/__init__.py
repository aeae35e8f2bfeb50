"""What one process holds between requests, and the one way to change a model.

- `models`: the live models (count arrays the engine scores with), kept in step with the
  database by generation;
- `write`: `ModelWrite`, the only way any use case changes a model's counts;
- `records`: the classification records and activity counters buffered for the background
  writer.

It sits between `service` (which owns the use cases) and `store` (the SQL): the service asks
this room for a model, and hands a write to it; nothing here knows of HTTP or of messages.
"""
