"""The built-in SQL strategies: .sql files of named blocks, and the worker and enqueuer
processes that run them."""
