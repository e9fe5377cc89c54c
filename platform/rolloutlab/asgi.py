"""The ASGI application: Django for HTTP, Channels for the websockets under /ws/.

daphne -b 0.0.0.0 -p 8000 rolloutlab.asgi:application
"""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "rolloutlab.settings")
django_asgi = get_asgi_application()  # sets Django up before anything imports models

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from rolloutlab.execution.monitor import start_monitor  # noqa: E402
from rolloutlab.outages import SocketOutages  # noqa: E402
from rolloutlab.runs.routing import websocket_urlpatterns  # noqa: E402
from rolloutlab.serving import install as bound_request_bodies  # noqa: E402

bound_request_bodies()  # before daphne serves: a body over its route's cap is refused unread, and never parsed

application = ProtocolTypeRouter(
    {
        "http": django_asgi,
        # an outage meets the session lookup before any consumer: SocketOutages closes with 4503 then
        "websocket": SocketOutages(AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns)))),
    }
)

start_monitor()  # the web process notices runs whose worker stopped heartbeating
