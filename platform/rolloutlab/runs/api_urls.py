from django.urls import path

from rolloutlab.runs import api

app_name = "api"
urlpatterns = [
    path("schema", api.schema, name="schema"),
    path("runs", api.runs, name="runs"),
    path("runs/<int:run_id>", api.run_detail, name="run"),
    path("runs/<int:run_id>/cancel", api.cancel, name="cancel"),
    path("runs/<int:run_id>/rerun", api.rerun, name="rerun"),
    path("runs/<int:run_id>/keys", api.keys, name="keys"),
    path("runs/<int:run_id>/series", api.series, name="series"),
    path("runs/<int:run_id>/samples", api.samples, name="samples"),
    path("runs/<int:run_id>/logs", api.logs, name="logs"),
]
