from django.contrib import admin

from rolloutlab.accounts.models import ApiToken


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ("name", "user", "created_at", "last_used_at")
    readonly_fields = ("digest",)
