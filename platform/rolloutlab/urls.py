from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from django.views.generic import RedirectView

from rolloutlab.accounts import views as account_views
from rolloutlab.api import api

urlpatterns = [
    path("", RedirectView.as_view(pattern_name="runs:list", permanent=False)),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("runs/", include("rolloutlab.runs.urls")),
    path("compare/", include("rolloutlab.compare.urls")),
    path("audit/", include("rolloutlab.audit.urls")),
    path("account/", include("rolloutlab.accounts.urls")),
    path("projects/", include("rolloutlab.alerts.urls")),
    path("api/", api.urls),
    path("share/<str:token>/", account_views.shared, name="share"),
]

handler500 = "rolloutlab.outages.server_error"  # an outage met outside a view is a 503 too
