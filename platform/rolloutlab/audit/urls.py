from django.urls import path

from rolloutlab.audit import views

app_name = "audit"
urlpatterns = [
    path("runs/<int:run_id>/", views.audit_page, name="page"),
    path("runs/<int:run_id>/verify/", views.verify, name="verify"),
    path("differences/", views.differences, name="differences"),
    path("import/", views.import_page, name="import"),
]
