from django.urls import path

from rolloutlab.runs.consumers import RunConsumer

websocket_urlpatterns = [path("ws/runs/<int:run_id>/", RunConsumer.as_asgi())]
