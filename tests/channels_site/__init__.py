"""A minimal Django Channels site served by daphne, for tests/integrations/test_channels.py
(run in a subprocess with this directory's parent on the path)."""
