"""What one process holds between requests, and the one way to change a model.

- `models`: the models a process holds, within a memory budget (LRU), loaded on use or in
  the background; `held`: one held model (count arrays the engine scores with), kept in step
  with the database by generation; `cold`: models not held, scored from their messages' rows;
  `memory`: how the process's allocator gives freed model memory back;
- `blend`: a personal model and its backing model merged for one classification;
- `write`: `ModelWrite`, the only way any use case changes a model's counts;
- `records`: the classification records and activity counters buffered for the background
  writer.

It sits between `service` (which owns the use cases) and `store` (the SQL): the service asks
this room for a model, and hands a write to it; nothing here knows of HTTP or of messages.
"""
