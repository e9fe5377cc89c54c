from pathlib import Path

import plotly
from django.http import FileResponse
from django.views.decorators.cache import cache_control
from django.views.decorators.http import require_GET

PLOTLY_JS = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"


@require_GET
@cache_control(public=True, max_age=86400)
def plotly_bundle(request):
    """Plotly.js from the plotly package's own bundle: no CDN, no front-end build."""
    return FileResponse(open(PLOTLY_JS, "rb"), content_type="text/javascript")
