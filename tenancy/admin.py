from django.contrib import admin

from tenancy.models import ApiToken, Membership, Org


@admin.register(Org)
class OrgAdmin(admin.ModelAdmin):
    list_display = ["name", "created_at"]


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ["prefix", "org", "role", "name", "created_at", "last_used_at", "revoked_at"]
    readonly_fields = ["prefix", "digest"]


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ["user", "org", "role"]
