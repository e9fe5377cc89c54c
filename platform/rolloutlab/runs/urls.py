from django.urls import path

from rolloutlab.runs import views

app_name = "runs"
urlpatterns = [
    path("", views.run_list, name="list"),
    path("launch/", views.launch, name="launch"),
    path("launch/warnings/", views.launch_warnings, name="launch-warnings"),
    path("launch/yaml/", views.launch_yaml, name="launch-yaml"),
    path("launch/check/", views.launch_check, name="launch-check"),
    path("methods/<str:name>/", views.method_card, name="method-card"),
    path("<int:run_id>/", views.run_detail, name="detail"),
    path("<int:run_id>/cancel/", views.cancel, name="cancel"),
    path("<int:run_id>/resume/", views.resume, name="resume"),
    path("<int:run_id>/rerun/", views.rerun, name="rerun"),
    path("<int:run_id>/delete/", views.delete, name="delete"),
    path("<int:run_id>/share/", views.share, name="share"),
]
