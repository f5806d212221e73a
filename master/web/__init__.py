"""The master's dashboard and HTTP JSON API, served on its metrics port (``routes.WebApi``)."""
