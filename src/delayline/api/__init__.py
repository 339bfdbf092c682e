"""The HTTP API: FastAPI over the async SDK. See :func:`delayline.api.app.create_app`."""
