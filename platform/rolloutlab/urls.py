from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from django.views.generic import RedirectView

from rolloutlab.audit import views as audit_views
from rolloutlab.compare import views as compare_views
from rolloutlab.metrics.views import plotly_bundle

urlpatterns = [
    path("", RedirectView.as_view(pattern_name="runs:list", permanent=False)),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("vendor/plotly.min.js", plotly_bundle, name="plotly"),
    path("runs/", include("rolloutlab.runs.urls")),
    path("api/", include("rolloutlab.runs.api_urls")),
    path("compare/", include("rolloutlab.compare.urls")),
    path("audit/", include("rolloutlab.audit.urls")),
    path("api/bundles", audit_views.import_api, name="bundle-import"),
    path("api/runs/<int:run_id>/bundle", audit_views.bundle, name="bundle"),
    path("api/runs/<int:run_id>/verify", audit_views.verify_api, name="verify"),
    path("api/runs/<int:run_id>/audit", audit_views.audit_api, name="audit"),
    path("api/differences", audit_views.differences_api, name="differences"),
    path("api/compare", compare_views.compare_data, name="compare-data"),
    path("api/compare/export", compare_views.compare_export, name="compare-export"),
]
