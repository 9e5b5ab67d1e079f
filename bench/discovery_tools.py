"""The data of `bench/discovery.py`: 200 tools over 10 servers, and 50 queries.

The tools are modelled on the public MCP servers' own tool lists, names and
descriptions (GitHub's github-mcp-server, the GitLab and Slack reference
servers, Linear's hosted server, the filesystem reference server, Postgres MCP
Pro, Playwright MCP, a Google Drive/Sheets/Docs server, mcp-atlassian's Jira
half and Sentry's server), exposed as the gateway exposes them:
`{server}__{tool}`. The wording is close to the originals, terse where theirs
is terse: the index must work on what servers really write.

The queries are what an agent would type while working (a task in its own
words, not a tool name), each with the one tool that does it. They were
written before the index was tuned and are not changed to suit it; when a query
names its system ("on GitHub", "in Jira") it is because a person would have to.

Imported by `bench/discovery.py` and `tests/gateway/test_discovery.py`.
"""

from __future__ import annotations

from typing import Any

import mcp.types as types

__all__ = ["QUERIES", "SERVERS", "TOOLS"]

Schema = dict[str, Any]


def _str(description: str, **extra: Any) -> Schema:
    return {"type": "string", "description": description, **extra}


def _int(description: str, **extra: Any) -> Schema:
    return {"type": "integer", "description": description, **extra}


def _bool(description: str) -> Schema:
    return {"type": "boolean", "description": description}


def _arr(description: str, items: Schema | None = None) -> Schema:
    return {
        "type": "array",
        "description": description,
        "items": items or {"type": "string"},
    }


def _obj(description: str, properties: dict[str, Schema], *required: str) -> Schema:
    schema: Schema = {
        "type": "object",
        "description": description,
        "properties": properties,
    }
    if required:
        schema["required"] = list(required)
    return schema


def _tool(
    server: str,
    name: str,
    description: str,
    properties: dict[str, Schema] | None = None,
    required: tuple[str, ...] = (),
    *,
    read_only: bool | None = None,
) -> types.Tool:
    schema: Schema = {"type": "object", "properties": properties or {}}
    if required:
        schema["required"] = list(required)
    annotations = (
        None if read_only is None else types.ToolAnnotations(read_only_hint=read_only)
    )
    return types.Tool(
        name=f"{server}__{name}",
        description=description,
        input_schema=schema,
        annotations=annotations,
    )


# ------------------------------------------------------------------ GitHub

_OWNER = _str("Repository owner (username or organization)")
_REPO = _str("Repository name")
_PAGE = _int("Page number for pagination (min 1)", minimum=1)
_PER_PAGE = _int("Results per page for pagination (min 1, max 100)", maximum=100)
_GH = {"owner": _OWNER, "repo": _REPO}
_GH_REQ = ("owner", "repo")


def _gh(
    name: str,
    description: str,
    properties: dict[str, Schema] | None = None,
    required: tuple[str, ...] = (),
    *,
    read_only: bool | None = None,
) -> types.Tool:
    return _tool("github", name, description, properties, required, read_only=read_only)


GITHUB = (
    _gh(
        "get_me",
        "Get details of the authenticated GitHub user. Use this when a request is "
        "about the user's own profile for GitHub. Or when information is missing "
        "to build other tool calls.",
        read_only=True,
    ),
    _gh(
        "search_repositories",
        "Find GitHub repositories by name, description, readme, topics, or other "
        "metadata. Perfect for discovering projects, finding examples, or locating "
        "specific repositories across GitHub.",
        {
            "query": _str(
                "Repository search query. Examples: 'machine learning in:name "
                "stars:>1000 language:python', 'topic:react', 'user:facebook'."
            ),
            "page": _PAGE,
            "perPage": _PER_PAGE,
        },
        ("query",),
        read_only=True,
    ),
    _gh(
        "get_file_contents",
        "Get the contents of a file or directory from a GitHub repository",
        {
            **_GH,
            "path": _str("Path to file/directory (directories must end with a slash)"),
            "ref": _str("Accepts optional git refs such as `refs/tags/{tag}`"),
            "sha": _str("Accepts optional commit SHA. If specified, it is used"),
        },
        _GH_REQ,
        read_only=True,
    ),
    _gh(
        "create_or_update_file",
        "Create or update a single file in a GitHub repository. If updating, you "
        "must provide the SHA of the file you want to update. Use this tool to "
        "create or update a file in a GitHub repository remotely; do not use it "
        "for local file operations.",
        {
            **_GH,
            "path": _str("Path where to create/update the file"),
            "content": _str("Content of the file"),
            "message": _str("Commit message"),
            "branch": _str("Branch to create/update the file in"),
            "sha": _str("Required if updating an existing file. The blob SHA"),
        },
        (*_GH_REQ, "path", "content", "message", "branch"),
    ),
    _gh(
        "push_files",
        "Push multiple files to a GitHub repository in a single commit",
        {
            **_GH,
            "branch": _str("Branch to push to"),
            "files": _arr(
                "Array of file objects to push, each object with path (string) and "
                "content (string)",
                _obj(
                    "A file",
                    {
                        "path": _str("path to the file"),
                        "content": _str("file content"),
                    },
                    "path",
                    "content",
                ),
            ),
            "message": _str("Commit message"),
        },
        (*_GH_REQ, "branch", "files", "message"),
    ),
    _gh(
        "create_repository",
        "Create a new GitHub repository in your account or specified organization",
        {
            "name": _str("Repository name"),
            "description": _str("Repository description"),
            "organization": _str("Organization to create the repository in"),
            "private": _bool("Whether repo should be private"),
            "autoInit": _bool("Initialize with README"),
        },
        ("name",),
    ),
    _gh(
        "fork_repository",
        "Fork a GitHub repository to your account or specified organization",
        {**_GH, "organization": _str("Organization to fork to")},
        _GH_REQ,
    ),
    _gh(
        "create_branch",
        "Create a new branch in a GitHub repository",
        {
            **_GH,
            "branch": _str("Name for new branch"),
            "from_branch": _str("Source branch (defaults to repo default)"),
        },
        (*_GH_REQ, "branch"),
    ),
    _gh(
        "list_branches",
        "List branches in a GitHub repository",
        {**_GH, "page": _PAGE, "perPage": _PER_PAGE},
        _GH_REQ,
        read_only=True,
    ),
    _gh(
        "list_commits",
        "Get list of commits of a branch in a GitHub repository. Returns at least "
        "30 results per page by default.",
        {
            **_GH,
            "sha": _str("Commit SHA, branch or tag name to list commits of."),
            "author": _str("Author username or email address to filter commits by"),
            "page": _PAGE,
            "perPage": _PER_PAGE,
        },
        _GH_REQ,
        read_only=True,
    ),
    _gh(
        "get_commit",
        "Get details for a commit from a GitHub repository",
        {
            **_GH,
            "sha": _str("Commit SHA, branch name, or tag name"),
            "include_diff": _bool("Whether to include file diffs and stats"),
        },
        (*_GH_REQ, "sha"),
        read_only=True,
    ),
    _gh(
        "search_code",
        "Fast and precise code search across ALL GitHub repositories using GitHub's "
        "native search engine. Best for finding exact symbols, functions, classes, "
        "or specific code patterns.",
        {
            "query": _str(
                "Search query using GitHub's powerful code search syntax. Examples: "
                "'content:Skill language:Java org:github', 'repo:github/mcp path:*.go'"
            ),
            "sort": _str("Sort field ('indexed' only)"),
            "order": _str("Sort order for results", enum=["asc", "desc"]),
            "page": _PAGE,
            "perPage": _PER_PAGE,
        },
        ("query",),
        read_only=True,
    ),
    _gh(
        "list_issues",
        "List issues in a GitHub repository. For pagination, use the 'endCursor' "
        "from the previous response's 'pageInfo' in the 'after' parameter.",
        {
            **_GH,
            "state": _str("Filter by state", enum=["OPEN", "CLOSED"]),
            "labels": _arr("Filter by labels"),
            "orderBy": _str("Order issues by field", enum=["CREATED_AT", "UPDATED_AT"]),
            "direction": _str("Order direction", enum=["ASC", "DESC"]),
            "since": _str("Filter by date (ISO 8601 timestamp)"),
            "after": _str("Cursor for pagination"),
        },
        _GH_REQ,
        read_only=True,
    ),
    _gh(
        "get_issue",
        "Get details of a specific issue in a GitHub repository.",
        {**_GH, "issue_number": _int("The number of the issue")},
        (*_GH_REQ, "issue_number"),
        read_only=True,
    ),
    _gh(
        "create_issue",
        "Create a new issue in a GitHub repository.",
        {
            **_GH,
            "title": _str("Issue title"),
            "body": _str("Issue body content"),
            "assignees": _arr("Usernames to assign to this issue"),
            "labels": _arr("Labels to apply to this issue"),
            "milestone": _int("Milestone number"),
            "type": _str("Type of this issue"),
        },
        (*_GH_REQ, "title"),
    ),
    _gh(
        "update_issue",
        "Update an existing issue in a GitHub repository.",
        {
            **_GH,
            "issue_number": _int("Issue number to update"),
            "title": _str("New title"),
            "body": _str("New description"),
            "state": _str("New state", enum=["open", "closed"]),
            "state_reason": _str(
                "Reason for the state change",
                enum=["completed", "not_planned", "duplicate"],
            ),
            "labels": _arr("New labels"),
            "assignees": _arr("New assignees"),
        },
        (*_GH_REQ, "issue_number"),
    ),
    _gh(
        "add_issue_comment",
        "Add a comment to a specific issue in a GitHub repository. Use this tool to "
        "add comments to pull requests as well (in this case pass pull request "
        "number as issue_number), but only if user is not asking specifically to "
        "add review comments.",
        {
            **_GH,
            "issue_number": _int("Issue number to comment on"),
            "body": _str("Comment content"),
        },
        (*_GH_REQ, "issue_number", "body"),
    ),
    _gh(
        "search_issues",
        "Search for issues in GitHub repositories using issues search syntax "
        "already scoped to is:issue",
        {
            "query": _str("Search query using GitHub issues search syntax"),
            "owner": _str("Optional repository owner."),
            "repo": _str("Optional repository name."),
            "sort": _str(
                "Sort field by number of matches of categories, defaults to best match",
                enum=["comments", "reactions", "created", "updated"],
            ),
            "order": _str("Sort order", enum=["asc", "desc"]),
            "page": _PAGE,
            "perPage": _PER_PAGE,
        },
        ("query",),
        read_only=True,
    ),
    _gh(
        "list_pull_requests",
        "List pull requests in a GitHub repository. If the user specifies an "
        "author, then DO NOT use this tool and use the search_pull_requests tool "
        "instead.",
        {
            **_GH,
            "state": _str("Filter by state", enum=["open", "closed", "all"]),
            "head": _str("Filter by head user/org and branch"),
            "base": _str("Filter by base branch"),
            "sort": _str("Sort by", enum=["created", "updated", "popularity"]),
            "direction": _str("Sort direction", enum=["asc", "desc"]),
            "page": _PAGE,
            "perPage": _PER_PAGE,
        },
        _GH_REQ,
        read_only=True,
    ),
    _gh(
        "get_pull_request",
        "Get details of a specific pull request in a GitHub repository.",
        {**_GH, "pullNumber": _int("Pull request number")},
        (*_GH_REQ, "pullNumber"),
        read_only=True,
    ),
    _gh(
        "create_pull_request",
        "Create a new pull request in a GitHub repository.",
        {
            **_GH,
            "title": _str("PR title"),
            "body": _str("PR description"),
            "head": _str("Branch containing changes"),
            "base": _str("Branch to merge into"),
            "draft": _bool("Create as draft PR"),
            "maintainer_can_modify": _bool("Allow maintainer edits"),
        },
        (*_GH_REQ, "title", "head", "base"),
    ),
    _gh(
        "merge_pull_request",
        "Merge a pull request in a GitHub repository.",
        {
            **_GH,
            "pullNumber": _int("Pull request number"),
            "commit_title": _str("Title for merge commit"),
            "commit_message": _str("Extra detail for merge commit"),
            "merge_method": _str("Merge method", enum=["merge", "squash", "rebase"]),
        },
        (*_GH_REQ, "pullNumber"),
    ),
    _gh(
        "get_pull_request_diff",
        "Get the diff of a pull request.",
        {**_GH, "pullNumber": _int("Pull request number")},
        (*_GH_REQ, "pullNumber"),
        read_only=True,
    ),
    _gh(
        "create_pull_request_review",
        "Create and submit a review for a pull request without review comments.",
        {
            **_GH,
            "pullNumber": _int("Pull request number"),
            "body": _str("Review comment text"),
            "event": _str(
                "Review action to perform",
                enum=["APPROVE", "REQUEST_CHANGES", "COMMENT"],
            ),
            "commitID": _str("SHA of commit to review"),
        },
        (*_GH_REQ, "pullNumber", "body", "event"),
    ),
    _gh(
        "list_workflow_runs",
        "List workflow runs for a specific workflow",
        {
            **_GH,
            "workflow_id": _str("The workflow ID or workflow file name"),
            "branch": _str("Returns workflow runs associated with a branch."),
            "status": _str(
                "Returns workflow runs with the check run status",
                enum=["queued", "in_progress", "completed", "requested", "waiting"],
            ),
            "event": _str("Returns workflow runs for a specific event type"),
            "page": _PAGE,
            "perPage": _PER_PAGE,
        },
        (*_GH_REQ, "workflow_id"),
        read_only=True,
    ),
)

# ------------------------------------------------------------------ GitLab

_PROJECT = _str("Project ID or URL-encoded path")
_MR_IID = _str("The internal ID of the merge request")
_ISSUE_IID = _int("The internal ID of the project issue")


def _gl(
    name: str,
    description: str,
    properties: dict[str, Schema] | None = None,
    required: tuple[str, ...] = ("project_id",),
    *,
    read_only: bool | None = None,
) -> types.Tool:
    return _tool(
        "gitlab",
        name,
        description,
        {"project_id": _PROJECT, **(properties or {})},
        required,
        read_only=read_only,
    )


GITLAB = (
    _gl(
        "search_repositories",
        "Search for GitLab projects",
        {
            "search": _str("Search query"),
            "page": _PAGE,
            "per_page": _PER_PAGE,
        },
        ("search",),
        read_only=True,
    ),
    _gl(
        "get_file_contents",
        "Get the contents of a file or directory from a GitLab project",
        {
            "file_path": _str("Path to the file or directory"),
            "ref": _str("Branch/tag/commit to get contents from"),
        },
        ("project_id", "file_path"),
        read_only=True,
    ),
    _gl(
        "create_or_update_file",
        "Create or update a single file in a GitLab project",
        {
            "file_path": _str("Path where to create/update the file"),
            "content": _str("Content of the file"),
            "commit_message": _str("Commit message"),
            "branch": _str("Branch to create/update the file in"),
            "previous_path": _str("Path of the file to move/rename"),
        },
        ("project_id", "file_path", "content", "commit_message", "branch"),
    ),
    _gl(
        "push_files",
        "Push multiple files to a GitLab project in a single commit",
        {
            "branch": _str("Branch to push to"),
            "files": _arr(
                "Array of files to push",
                _obj(
                    "A file",
                    {
                        "file_path": _str("Path where to create the file"),
                        "content": _str("Content of the file"),
                    },
                    "file_path",
                    "content",
                ),
            ),
            "commit_message": _str("Commit message"),
        },
        ("project_id", "branch", "files", "commit_message"),
    ),
    _gl(
        "create_branch",
        "Create a new branch in a GitLab project",
        {
            "branch": _str("Name for the new branch"),
            "ref": _str("Source branch/commit for new branch"),
        },
        ("project_id", "branch"),
    ),
    _gl(
        "list_projects",
        "List projects accessible by the current user",
        {
            "search": _str("Search term for projects"),
            "owned": _bool("Filter for projects owned by current user"),
            "membership": _bool("Filter for projects where current user is a member"),
            "order_by": _str(
                "Return projects ordered by field",
                enum=["id", "name", "path", "created_at", "last_activity_at"],
            ),
            "page": _PAGE,
            "per_page": _PER_PAGE,
        },
        (),
        read_only=True,
    ),
    _gl(
        "list_issues",
        "List issues in a GitLab project with filtering options",
        {
            "assignee_username": _str("Return issues assigned to the given username"),
            "author_username": _str("Return issues created by the given username"),
            "labels": _arr("Array of label names"),
            "milestone": _str("Milestone title"),
            "state": _str(
                "Return issues with a specific state",
                enum=["opened", "closed", "all"],
            ),
            "search": _str("Search for specific terms"),
            "page": _PAGE,
            "per_page": _PER_PAGE,
        },
        read_only=True,
    ),
    _gl(
        "get_issue",
        "Get details of a specific issue in a GitLab project",
        {"issue_iid": _ISSUE_IID},
        ("project_id", "issue_iid"),
        read_only=True,
    ),
    _gl(
        "create_issue",
        "Create a new issue in a GitLab project",
        {
            "title": _str("Issue title"),
            "description": _str("Issue description"),
            "assignee_ids": _arr("Array of user IDs to assign", {"type": "integer"}),
            "labels": _arr("Array of label names"),
            "milestone_id": _int("Milestone ID to assign"),
        },
        ("project_id", "title"),
    ),
    _gl(
        "update_issue",
        "Update an issue in a GitLab project",
        {
            "issue_iid": _ISSUE_IID,
            "title": _str("The title of the issue"),
            "description": _str("The description of the issue"),
            "state_event": _str(
                "Update issue state (close/reopen)", enum=["close", "reopen"]
            ),
            "labels": _arr("Array of label names"),
            "assignee_ids": _arr("Array of user IDs to assign", {"type": "integer"}),
        },
        ("project_id", "issue_iid"),
    ),
    _gl(
        "create_note",
        "Create a new note (comment) to an issue or merge request",
        {
            "noteable_type": _str(
                "Type of noteable (issue or merge_request)",
                enum=["issue", "merge_request"],
            ),
            "noteable_iid": _int("IID of the issue or merge request"),
            "body": _str("Note content"),
        },
        ("project_id", "noteable_type", "noteable_iid", "body"),
    ),
    _gl(
        "list_merge_requests",
        "List merge requests in a GitLab project with filtering options",
        {
            "state": _str(
                "Return merge requests with a specific state",
                enum=["opened", "closed", "locked", "merged", "all"],
            ),
            "reviewer_username": _str("Returns merge requests with the given reviewer"),
            "author_username": _str("Returns merge requests created by the user"),
            "source_branch": _str("Return merge requests with the given source branch"),
            "target_branch": _str("Return merge requests with the given target branch"),
            "page": _PAGE,
            "per_page": _PER_PAGE,
        },
        read_only=True,
    ),
    _gl(
        "get_merge_request",
        "Get details of a merge request (Either mergeRequestIid or branchName must "
        "be provided)",
        {
            "merge_request_iid": _MR_IID,
            "source_branch": _str("Source branch name"),
        },
        read_only=True,
    ),
    _gl(
        "get_merge_request_diffs",
        "Get the changes/diffs of a merge request (Either mergeRequestIid or "
        "branchName must be provided)",
        {
            "merge_request_iid": _MR_IID,
            "source_branch": _str("Source branch name"),
            "view": _str("Diff view type", enum=["inline", "parallel"]),
        },
        read_only=True,
    ),
    _gl(
        "create_merge_request",
        "Create a new merge request in a GitLab project",
        {
            "title": _str("Merge request title"),
            "description": _str("Merge request description"),
            "source_branch": _str("Branch containing changes"),
            "target_branch": _str("Branch to merge into"),
            "draft": _bool("Create as draft merge request"),
            "remove_source_branch": _bool("Remove the source branch after merge"),
        },
        ("project_id", "title", "source_branch", "target_branch"),
    ),
    _gl(
        "merge_merge_request",
        "Merge a merge request in a GitLab project",
        {
            "merge_request_iid": _MR_IID,
            "merge_commit_message": _str("Custom merge commit message"),
            "squash": _bool("Squash commits into a single commit when merging"),
            "should_remove_source_branch": _bool("Remove the source branch"),
            "merge_when_pipeline_succeeds": _bool("Merge when pipeline succeeds"),
        },
        ("project_id", "merge_request_iid"),
    ),
    _gl(
        "list_pipelines",
        "List pipelines in a GitLab project with filtering options",
        {
            "scope": _str(
                "The scope of pipelines",
                enum=["running", "pending", "finished", "branches", "tags"],
            ),
            "status": _str(
                "The status of pipelines",
                enum=["created", "running", "success", "failed", "canceled"],
            ),
            "ref": _str("The ref of pipelines"),
            "page": _PAGE,
            "per_page": _PER_PAGE,
        },
        read_only=True,
    ),
    _gl(
        "get_pipeline_job_output",
        "Get the output/trace of a GitLab pipeline job number",
        {
            "job_id": _str("The ID of the job"),
            "limit": _int("Maximum number of lines to return from the end of the log"),
        },
        ("project_id", "job_id"),
        read_only=True,
    ),
    _gl(
        "retry_pipeline",
        "Retry a failed or canceled pipeline",
        {"pipeline_id": _str("The ID of the pipeline to retry")},
        ("project_id", "pipeline_id"),
    ),
    _gl(
        "list_labels",
        "List labels for a project",
        {
            "with_counts": _bool(
                "Whether or not to include issue and merge request counts"
            ),
            "search": _str("Keyword to filter labels by"),
        },
        read_only=True,
    ),
)

# ------------------------------------------------------------------ Slack

_CHANNEL = _str("The ID of the channel")
_TS = _str("The timestamp of the message in the format '1234567890.123456'")


def _sl(
    name: str,
    description: str,
    properties: dict[str, Schema] | None = None,
    required: tuple[str, ...] = (),
    *,
    read_only: bool | None = None,
) -> types.Tool:
    return _tool(
        "slack",
        f"slack_{name}",
        description,
        properties,
        required,
        read_only=read_only,
    )


SLACK = (
    _sl(
        "list_channels",
        "List public or pre-defined channels in the workspace with pagination",
        {
            "limit": _int(
                "Maximum number of channels to return (default 100, max 200)"
            ),
            "cursor": _str("Pagination cursor for next page of results"),
        },
        read_only=True,
    ),
    _sl(
        "post_message",
        "Post a new message to a Slack channel",
        {
            "channel_id": _str("The ID of the channel to post to"),
            "text": _str("The message text to post"),
        },
        ("channel_id", "text"),
    ),
    _sl(
        "reply_to_thread",
        "Reply to a specific message thread in Slack",
        {
            "channel_id": _str("The ID of the channel containing the thread"),
            "thread_ts": _str(
                "The timestamp of the parent message in the format "
                "'1234567890.123456'. Timestamps in the format without the period "
                "can be converted by adding the period such that 6 numbers come "
                "after it."
            ),
            "text": _str("The reply text"),
        },
        ("channel_id", "thread_ts", "text"),
    ),
    _sl(
        "add_reaction",
        "Add a reaction emoji to a message",
        {
            "channel_id": _str("The ID of the channel containing the message"),
            "timestamp": _str("The timestamp of the message to react to"),
            "reaction": _str("The name of the emoji reaction (without ::)"),
        },
        ("channel_id", "timestamp", "reaction"),
    ),
    _sl(
        "get_channel_history",
        "Get recent messages from a channel",
        {
            "channel_id": _CHANNEL,
            "limit": _int("Number of messages to retrieve (default 10)"),
        },
        ("channel_id",),
        read_only=True,
    ),
    _sl(
        "get_thread_replies",
        "Get all replies in a message thread",
        {
            "channel_id": _str("The ID of the channel containing the thread"),
            "thread_ts": _str(
                "The timestamp of the parent message in the format '1234567890.123456'."
            ),
        },
        ("channel_id", "thread_ts"),
        read_only=True,
    ),
    _sl(
        "get_users",
        "Get a list of all users in the workspace with their basic profile information",
        {
            "cursor": _str("Pagination cursor for next page of results"),
            "limit": _int("Maximum number of users to return (default 100, max 200)"),
        },
        read_only=True,
    ),
    _sl(
        "get_user_profile",
        "Get detailed profile information for a specific user",
        {"user_id": _str("The ID of the user")},
        ("user_id",),
        read_only=True,
    ),
    _sl(
        "search_messages",
        "Search messages in public channels, private channels and direct messages "
        "with Slack's search modifiers (in:#channel, from:@user, before:, after:)",
        {
            "query": _str("Search query"),
            "sort": _str("Sort by", enum=["score", "timestamp"]),
            "count": _int("Number of results per page (max 100)"),
        },
        ("query",),
        read_only=True,
    ),
    _sl(
        "create_channel",
        "Create a new public or private channel",
        {
            "name": _str("Name of the channel to create (lowercase, no spaces)"),
            "is_private": _bool("Create a private channel"),
        },
        ("name",),
    ),
    _sl(
        "invite_to_channel",
        "Invite one or more users to a channel",
        {
            "channel_id": _CHANNEL,
            "user_ids": _arr("IDs of the users to invite"),
        },
        ("channel_id", "user_ids"),
    ),
    _sl(
        "set_channel_topic",
        "Set the topic of a channel",
        {"channel_id": _CHANNEL, "topic": _str("The new topic")},
        ("channel_id", "topic"),
    ),
    _sl(
        "upload_file",
        "Upload a file or text snippet and share it in a channel",
        {
            "channel_id": _str("The ID of the channel to share the file in"),
            "filename": _str("Name of the file"),
            "content": _str("Text content of the file"),
            "initial_comment": _str("Message text introducing the file"),
        },
        ("channel_id", "filename", "content"),
    ),
    _sl(
        "schedule_message",
        "Schedule a message to be sent to a channel at a later time",
        {
            "channel_id": _CHANNEL,
            "text": _str("The message text"),
            "post_at": _int("Unix timestamp (seconds) when the message is sent"),
        },
        ("channel_id", "text", "post_at"),
    ),
    _sl(
        "update_message",
        "Update (edit) a message previously posted by the bot",
        {"channel_id": _CHANNEL, "ts": _TS, "text": _str("New message text")},
        ("channel_id", "ts", "text"),
    ),
    _sl(
        "delete_message",
        "Delete a message previously posted by the bot",
        {"channel_id": _CHANNEL, "ts": _TS},
        ("channel_id", "ts"),
    ),
    _sl(
        "pin_message",
        "Pin a message to a channel",
        {"channel_id": _CHANNEL, "timestamp": _TS},
        ("channel_id", "timestamp"),
    ),
    _sl(
        "open_conversation",
        "Open a direct message or multi-person direct message and return its "
        "channel ID, to post into it",
        {"users": _arr("IDs of the users (1 for a DM, up to 8 for a group DM)")},
        ("users",),
    ),
)

# ------------------------------------------------------------------ Linear

_LIMIT = _int("The number of items to return (max 250)", maximum=250)
_CURSOR = _str("An ID to start the page after (cursor)")


def _li(
    name: str,
    description: str,
    properties: dict[str, Schema] | None = None,
    required: tuple[str, ...] = (),
    *,
    read_only: bool | None = None,
) -> types.Tool:
    return _tool("linear", name, description, properties, required, read_only=read_only)


_ISSUE_FIELDS: dict[str, Schema] = {
    "title": _str("The issue title"),
    "description": _str("The issue description as Markdown"),
    "teamId": _str("The team UUID"),
    "assigneeId": _str("The assignee user ID"),
    "priority": _int("0 = No priority, 1 = Urgent, 2 = High, 3 = Normal, 4 = Low"),
    "stateId": _str("The issue state ID"),
    "projectId": _str("The project ID"),
    "labelIds": _arr("Label IDs to apply"),
    "dueDate": _str("The due date (ISO format)"),
    "parentId": _str("The parent issue ID, if this is a sub-issue"),
}

LINEAR = (
    _li(
        "list_issues",
        "List issues in the user's Linear workspace",
        {
            "query": _str("An optional search query"),
            "teamId": _str("The team UUID"),
            "stateId": _str("The state UUID"),
            "assigneeId": _str("The assignee UUID"),
            "projectId": _str("The project UUID"),
            "limit": _LIMIT,
            "after": _CURSOR,
        },
        read_only=True,
    ),
    _li(
        "get_issue",
        "Retrieve a Linear issue details by ID, including attachments",
        {"id": _str("The issue ID")},
        ("id",),
        read_only=True,
    ),
    _li(
        "create_issue",
        "Create a new Linear issue",
        _ISSUE_FIELDS,
        ("title", "teamId"),
    ),
    _li(
        "update_issue",
        "Update an existing Linear issue",
        {"id": _str("The issue ID"), **_ISSUE_FIELDS},
        ("id",),
    ),
    _li(
        "list_my_issues",
        "List issues assigned to the current user",
        {"limit": _LIMIT, "after": _CURSOR},
        read_only=True,
    ),
    _li(
        "get_issue_git_branch_name",
        "Retrieve the branch name for a Linear issue by ID",
        {"id": _str("The issue ID")},
        ("id",),
        read_only=True,
    ),
    _li(
        "list_comments",
        "Retrieve comments for a Linear issue by ID",
        {"issueId": _str("The issue ID")},
        ("issueId",),
        read_only=True,
    ),
    _li(
        "create_comment",
        "Create a comment on a specific Linear issue",
        {
            "issueId": _str("The issue ID"),
            "body": _str("The content of the comment as Markdown"),
            "parentId": _str("A parent comment ID to reply to"),
        },
        ("issueId", "body"),
    ),
    _li(
        "list_issue_statuses",
        "List available issue statuses in a Linear team",
        {"teamId": _str("The team UUID")},
        ("teamId",),
        read_only=True,
    ),
    _li(
        "list_issue_labels",
        "List available issue labels in a Linear workspace or team",
        {"teamId": _str("Optional team UUID"), "name": _str("Filter by label name")},
        read_only=True,
    ),
    _li(
        "list_projects",
        "List projects in the user's Linear workspace",
        {
            "teamId": _str("Filter by team UUID"),
            "includeArchived": _bool("Include archived projects"),
            "limit": _LIMIT,
        },
        read_only=True,
    ),
    _li(
        "get_project",
        "Retrieve details of a specific project in Linear",
        {"query": _str("The ID or name of the project to retrieve")},
        ("query",),
        read_only=True,
    ),
    _li(
        "create_project",
        "Create a new project in Linear",
        {
            "name": _str("A descriptive name of the project"),
            "teamId": _str("The team UUID"),
            "summary": _str("A concise plaintext summary of the project (max 255)"),
            "description": _str("The full project description in Markdown format"),
            "startDate": _str("The start date of the project in ISO format"),
            "targetDate": _str("The target date of the project in ISO format"),
        },
        ("name", "teamId"),
    ),
    _li(
        "update_project",
        "Update an existing Linear project",
        {
            "id": _str("The ID of the project to update"),
            "name": _str("The new name of the project"),
            "summary": _str("A concise plaintext summary"),
            "state": _str("The state of the project"),
            "targetDate": _str("The target date of the project in ISO format"),
        },
        ("id",),
    ),
    _li(
        "list_teams",
        "List teams in the user's Linear workspace",
        {"query": _str("An optional search query"), "limit": _LIMIT},
        read_only=True,
    ),
    _li(
        "get_team",
        "Retrieve details of a specific Linear team",
        {"query": _str("The UUID, key, or name of the team to retrieve")},
        ("query",),
        read_only=True,
    ),
    _li(
        "list_users",
        "Retrieve users in the Linear workspace",
        {"query": _str("An optional search query"), "limit": _LIMIT},
        read_only=True,
    ),
    _li(
        "get_user",
        "Retrieve details of a specific Linear user",
        {"query": _str("The UUID or name of the user to retrieve")},
        ("query",),
        read_only=True,
    ),
    _li(
        "list_cycles",
        "Retrieve cycles for a specific Linear team",
        {
            "teamId": _str("The team ID"),
            "type": _str(
                "Retrieve the current, previous, next, or all cycles",
                enum=["current", "previous", "next"],
            ),
        },
        ("teamId",),
        read_only=True,
    ),
    _li(
        "list_documents",
        "List documents in the user's Linear workspace",
        {
            "query": _str("An optional search query"),
            "projectId": _str("Filter by project ID"),
            "limit": _LIMIT,
        },
        read_only=True,
    ),
    _li(
        "get_document",
        "Retrieve a Linear document by ID or slug",
        {"id": _str("The document ID or slug")},
        ("id",),
        read_only=True,
    ),
    _li(
        "search_documentation",
        "Search Linear's documentation to learn about features and usage",
        {"query": _str("The search query"), "page": _int("The page number")},
        ("query",),
        read_only=True,
    ),
)

# ------------------------------------------------------------------ filesystem

_PATH = _str("Path of the file or directory")

FILESYSTEM = (
    _tool(
        "filesystem",
        "read_text_file",
        "Read the complete contents of a file from the file system as text. "
        "Handles various text encodings and provides detailed error messages if "
        "the file cannot be read. Use this tool when you need to examine the "
        "contents of a single file. Use the 'head' parameter to read only the "
        "first N lines of a file, or the 'tail' parameter to read only the last N "
        "lines of a file. Only works within allowed directories.",
        {
            "path": _PATH,
            "head": _int("If provided, returns only the first N lines of the file"),
            "tail": _int("If provided, returns only the last N lines of the file"),
        },
        ("path",),
        read_only=True,
    ),
    _tool(
        "filesystem",
        "read_media_file",
        "Read an image or audio file. Returns the base64 encoded data and MIME "
        "type. Only works within allowed directories.",
        {"path": _PATH},
        ("path",),
        read_only=True,
    ),
    _tool(
        "filesystem",
        "read_multiple_files",
        "Read the contents of multiple files simultaneously. This is more efficient "
        "than reading files one by one when you need to analyze or compare "
        "multiple files. Each file's content is returned with its path as a "
        "reference. Failed reads for individual files won't stop the entire "
        "operation. Only works within allowed directories.",
        {"paths": _arr("Array of file paths to read")},
        ("paths",),
        read_only=True,
    ),
    _tool(
        "filesystem",
        "write_file",
        "Create a new file or completely overwrite an existing file with new "
        "content. Use with caution as it will overwrite existing files without "
        "warning. Handles text content with proper encoding. Only works within "
        "allowed directories.",
        {"path": _PATH, "content": _str("Content to write")},
        ("path", "content"),
    ),
    _tool(
        "filesystem",
        "edit_file",
        "Make line-based edits to a text file. Each edit replaces exact line "
        "sequences with new content. Returns a git-style diff showing the changes "
        "made. Only works within allowed directories.",
        {
            "path": _PATH,
            "edits": _arr(
                "Edits to apply",
                _obj(
                    "An edit",
                    {
                        "oldText": _str("Text to search for - must match exactly"),
                        "newText": _str("Text to replace with"),
                    },
                    "oldText",
                    "newText",
                ),
            ),
            "dryRun": _bool("Preview changes using git-style diff format"),
        },
        ("path", "edits"),
    ),
    _tool(
        "filesystem",
        "create_directory",
        "Create a new directory or ensure a directory exists. Can create multiple "
        "nested directories in one operation. If the directory already exists, "
        "this operation will succeed silently. Perfect for setting up directory "
        "structures for projects or ensuring required paths exist. Only works "
        "within allowed directories.",
        {"path": _PATH},
        ("path",),
    ),
    _tool(
        "filesystem",
        "list_directory",
        "Get a detailed listing of all files and directories in a specified path. "
        "Results clearly distinguish between files and directories with [FILE] "
        "and [DIR] prefixes. This tool is essential for understanding directory "
        "structure and finding specific files within a directory. Only works "
        "within allowed directories.",
        {"path": _PATH},
        ("path",),
        read_only=True,
    ),
    _tool(
        "filesystem",
        "list_directory_with_sizes",
        "Get a detailed listing of all files and directories in a specified path, "
        "including sizes. Results clearly distinguish between files and "
        "directories with [FILE] and [DIR] prefixes. This tool is useful for "
        "understanding directory structure and finding specific files within a "
        "directory. Only works within allowed directories.",
        {
            "path": _PATH,
            "sortBy": _str("Sort entries by name or size", enum=["name", "size"]),
        },
        ("path",),
        read_only=True,
    ),
    _tool(
        "filesystem",
        "directory_tree",
        "Get a recursive tree view of files and directories as a JSON structure. "
        "Each entry includes 'name', 'type' (file/directory), and 'children' for "
        "directories. Files have no children array, while directories always "
        "have a children array (which may be empty). Only works within allowed "
        "directories.",
        {
            "path": _PATH,
            "excludePatterns": _arr("Glob patterns to exclude"),
        },
        ("path",),
        read_only=True,
    ),
    _tool(
        "filesystem",
        "move_file",
        "Move or rename files and directories. Can move files between directories "
        "and rename them in a single operation. If the destination exists, the "
        "operation will fail. Works across different directories and can be used "
        "for simple renaming within the same directory. Both source and "
        "destination must be within allowed directories.",
        {"source": _str("Source path"), "destination": _str("Destination path")},
        ("source", "destination"),
    ),
    _tool(
        "filesystem",
        "search_files",
        "Recursively search for files and directories matching a pattern. The "
        "patterns should be glob-style patterns that match paths relative to the "
        "working directory. Use pattern like '*.ext' to match files in current "
        "directory, and '**/*.ext' to match files in all subdirectories. Returns "
        "full paths to all matching items. Great for finding files when you don't "
        "know their exact location. Only searches within allowed directories.",
        {
            "path": _PATH,
            "pattern": _str("Glob pattern to match"),
            "excludePatterns": _arr("Glob patterns to exclude"),
        },
        ("path", "pattern"),
        read_only=True,
    ),
    _tool(
        "filesystem",
        "get_file_info",
        "Retrieve detailed metadata about a file or directory. Returns "
        "comprehensive information including size, creation time, last modified "
        "time, permissions, and type. This tool is perfect for understanding file "
        "characteristics without reading the actual content. Only works within "
        "allowed directories.",
        {"path": _PATH},
        ("path",),
        read_only=True,
    ),
    _tool(
        "filesystem",
        "list_allowed_directories",
        "Returns the list of directories that this server is allowed to access. "
        "Subdirectories within these allowed directories are also accessible. Use "
        "this to understand which directories and their nested paths are "
        "available before trying to access files.",
        read_only=True,
    ),
)

# ------------------------------------------------------------------ Postgres

_SCHEMA = _str("Schema name")


def _pg(
    name: str,
    description: str,
    properties: dict[str, Schema] | None = None,
    required: tuple[str, ...] = (),
    *,
    read_only: bool | None = None,
) -> types.Tool:
    return _tool(
        "postgres", name, description, properties, required, read_only=read_only
    )


POSTGRES = (
    _pg(
        "list_schemas",
        "List all schemas in the database",
        read_only=True,
    ),
    _pg(
        "list_objects",
        "List objects in a schema",
        {
            "schema_name": _SCHEMA,
            "object_type": _str(
                "Object type: 'table', 'view', 'sequence', or 'extension'",
                enum=["table", "view", "sequence", "extension"],
            ),
        },
        ("schema_name",),
        read_only=True,
    ),
    _pg(
        "get_object_details",
        "Show detailed information about a database object",
        {
            "schema_name": _SCHEMA,
            "object_name": _str("Object name"),
            "object_type": _str(
                "Object type: 'table', 'view', 'sequence', or 'extension'"
            ),
        },
        ("schema_name", "object_name"),
        read_only=True,
    ),
    _pg(
        "execute_sql",
        "Execute any SQL query",
        {"sql": _str("SQL to run")},
        ("sql",),
    ),
    _pg(
        "explain_query",
        "Explains the execution plan for a SQL query, showing how the database "
        "will execute it and provides detailed cost estimates.",
        {
            "sql": _str("SQL query to explain"),
            "analyze": _bool(
                "When True, actually runs the query to show real execution "
                "statistics instead of estimates."
            ),
            "hypothetical_indexes": _arr(
                "A list of hypothetical indexes to simulate",
                _obj(
                    "An index",
                    {
                        "table": _str("The table name to add the index to"),
                        "columns": _arr("List of column names to include"),
                        "using": _str("Index method (default: 'btree')"),
                    },
                    "table",
                    "columns",
                ),
            ),
        },
        ("sql",),
        read_only=True,
    ),
    _pg(
        "get_top_queries",
        "Reports the slowest or most resource-intensive queries using data from "
        "the 'pg_stat_statements' extension.",
        {
            "sort_by": _str(
                "Ranking criteria: 'total_time' for total execution time or "
                "'mean_time' for mean execution time per call, or 'resources' for "
                "resource-intensive queries",
                enum=["total_time", "mean_time", "resources"],
            ),
            "limit": _int("Number of queries to return when ranking"),
        },
        read_only=True,
    ),
    _pg(
        "analyze_workload_indexes",
        "Analyze frequently executed queries in the database and recommend "
        "optimal indexes",
        {
            "max_index_size_mb": _int("Max index size in MB"),
            "method": _str("Method to use for analysis", enum=["dta", "llm"]),
        },
        read_only=True,
    ),
    _pg(
        "analyze_query_indexes",
        "Analyze a list of (up to 10) SQL queries and recommend optimal indexes",
        {
            "queries": _arr("List of Query strings to analyze"),
            "max_index_size_mb": _int("Max index size in MB"),
        },
        ("queries",),
        read_only=True,
    ),
    _pg(
        "analyze_db_health",
        "Analyzes database health. Here are the available health checks: index - "
        "checks for invalid, duplicate, and bloated indexes; connection - checks "
        "the number of connection and their utilization; vacuum - checks vacuum "
        "health for transaction id wraparound; sequence - checks sequences at risk "
        "of exceeding their maximum value; replication - checks replication "
        "health; buffer - checks for buffer cache hit rates; constraint - checks "
        "for invalid constraints; all - runs all checks.",
        {
            "health_type": _str(
                "Optional. Valid values are: all, buffer, connection, constraint, "
                "index, replication, sequence, vacuum."
            )
        },
        read_only=True,
    ),
    _pg(
        "list_extensions",
        "List the extensions installed in the database, with their versions",
        read_only=True,
    ),
    _pg(
        "list_active_queries",
        "List the queries running now (pg_stat_activity): pid, user, state, "
        "duration and wait event",
        {"min_duration_seconds": _int("Only queries running at least this long")},
        read_only=True,
    ),
    _pg(
        "cancel_query",
        "Cancel a running query by its backend pid (pg_cancel_backend), or "
        "terminate the backend",
        {
            "pid": _int("Backend process id"),
            "terminate": _bool("Terminate the whole backend instead of cancelling"),
        },
        ("pid",),
    ),
    _pg(
        "get_table_sizes",
        "Report the on-disk size of tables and their indexes, largest first",
        {"schema_name": _SCHEMA, "limit": _int("Number of tables to return")},
        read_only=True,
    ),
    _pg(
        "list_roles",
        "List database roles and their attributes (login, superuser, membership)",
        read_only=True,
    ),
    _pg(
        "list_locks",
        "Show current locks (pg_locks) with blocking and blocked pids and the "
        "queries involved",
        {"only_blocking": _bool("Show only lock waits that block other sessions")},
        read_only=True,
    ),
    _pg(
        "vacuum_analyze",
        "Run VACUUM ANALYZE on a table to reclaim storage and refresh planner "
        "statistics",
        {
            "schema_name": _SCHEMA,
            "table_name": _str("Table name"),
            "full": _bool("Run VACUUM FULL (locks the table)"),
        },
        ("table_name",),
    ),
)

# ------------------------------------------------------------------ Playwright

_ELEMENT = _str(
    "Human-readable element description used to obtain permission to interact "
    "with the element"
)
_REF = _str("Exact target element reference from the page snapshot")


def _pw(
    name: str,
    description: str,
    properties: dict[str, Schema] | None = None,
    required: tuple[str, ...] = (),
    *,
    read_only: bool | None = None,
) -> types.Tool:
    return _tool(
        "playwright",
        f"browser_{name}",
        description,
        properties,
        required,
        read_only=read_only,
    )


PLAYWRIGHT = (
    _pw(
        "navigate",
        "Navigate to a URL",
        {"url": _str("The URL to navigate to")},
        ("url",),
    ),
    _pw("navigate_back", "Go back to the previous page", read_only=True),
    _pw(
        "snapshot",
        "Capture accessibility snapshot of the current page, this is better than "
        "screenshot",
        read_only=True,
    ),
    _pw(
        "click",
        "Perform click on a web page",
        {
            "element": _ELEMENT,
            "ref": _REF,
            "doubleClick": _bool("Whether to perform a double click instead"),
            "button": _str(
                "Button to click, defaults to left", enum=["left", "right", "middle"]
            ),
        },
        ("element", "ref"),
    ),
    _pw(
        "type",
        "Type text into editable element",
        {
            "element": _ELEMENT,
            "ref": _REF,
            "text": _str("Text to type into the element"),
            "submit": _bool("Whether to submit entered text (press Enter after)"),
            "slowly": _bool("Whether to type one character at a time."),
        },
        ("element", "ref", "text"),
    ),
    _pw(
        "fill_form",
        "Fill multiple form fields",
        {
            "fields": _arr(
                "Fields to fill in",
                _obj(
                    "A field",
                    {
                        "name": _str("Human-readable field name"),
                        "type": _str(
                            "Type of the field",
                            enum=["textbox", "checkbox", "radio", "combobox", "slider"],
                        ),
                        "ref": _REF,
                        "value": _str("Value to fill in the field."),
                    },
                    "name",
                    "type",
                    "ref",
                    "value",
                ),
            )
        },
        ("fields",),
    ),
    _pw(
        "press_key",
        "Press a key on the keyboard",
        {
            "key": _str(
                "Name of the key to press or a character to generate, such as "
                "`ArrowLeft` or `a`"
            )
        },
        ("key",),
    ),
    _pw(
        "hover",
        "Hover over element on page",
        {"element": _ELEMENT, "ref": _REF},
        ("element", "ref"),
        read_only=True,
    ),
    _pw(
        "drag",
        "Perform drag and drop between two elements",
        {
            "startElement": _str("Human-readable source element description"),
            "startRef": _str("Exact source element reference from the page snapshot"),
            "endElement": _str("Human-readable target element description"),
            "endRef": _str("Exact target element reference from the page snapshot"),
        },
        ("startElement", "startRef", "endElement", "endRef"),
    ),
    _pw(
        "select_option",
        "Select an option in a dropdown",
        {
            "element": _ELEMENT,
            "ref": _REF,
            "values": _arr("Array of values to select in the dropdown."),
        },
        ("element", "ref", "values"),
    ),
    _pw(
        "file_upload",
        "Upload one or multiple files",
        {"paths": _arr("The absolute paths to the files to upload.")},
    ),
    _pw(
        "handle_dialog",
        "Handle a dialog",
        {
            "accept": _bool("Whether to accept the dialog."),
            "promptText": _str("The text of the prompt in case of a prompt dialog."),
        },
        ("accept",),
    ),
    _pw(
        "take_screenshot",
        "Take a screenshot of the current page. You can't perform actions based on "
        "the screenshot, use browser_snapshot for actions.",
        {
            "type": _str(
                "Image format for the screenshot. Default is png.", enum=["png", "jpeg"]
            ),
            "filename": _str("File name to save the screenshot to."),
            "element": _str(
                "Human-readable element description used to obtain "
                "permission to screenshot the element."
            ),
            "ref": _str("Exact target element reference from the page snapshot."),
            "fullPage": _bool(
                "When true, takes a screenshot of the full scrollable "
                "page, instead of the currently visible viewport."
            ),
        },
        read_only=True,
    ),
    _pw(
        "pdf_save",
        "Save page as PDF",
        {"filename": _str("File name to save the pdf to.")},
        read_only=True,
    ),
    _pw(
        "evaluate",
        "Evaluate JavaScript expression on page or element",
        {
            "function": _str(
                "() => { /* code */ } or (element) => { /* code */ } "
                "when element is provided"
            ),
            "element": _ELEMENT,
            "ref": _REF,
        },
        ("function",),
    ),
    _pw(
        "console_messages",
        "Returns all console messages",
        {"onlyErrors": _bool("Only return error messages")},
        read_only=True,
    ),
    _pw(
        "network_requests",
        "Returns all network requests since loading the page",
        read_only=True,
    ),
    _pw(
        "tabs",
        "List, create, close, or select a browser tab.",
        {
            "action": _str(
                "Operation to perform", enum=["list", "new", "close", "select"]
            ),
            "index": _int("Tab index, used for close/select."),
        },
        ("action",),
    ),
    _pw(
        "wait_for",
        "Wait for text to appear or disappear or a specified time to pass",
        {
            "time": _int("The time to wait in seconds"),
            "text": _str("The text to wait for"),
            "textGone": _str("The text to wait for to disappear"),
        },
        read_only=True,
    ),
    _pw(
        "resize",
        "Resize the browser window",
        {
            "width": _int("Width of the browser window"),
            "height": _int("Height of the browser window"),
        },
        ("width", "height"),
    ),
    _pw("close", "Close the page"),
    _pw(
        "install",
        "Install the browser specified in the config. Call this if you get an "
        "error about the browser not being installed.",
    ),
)

# ------------------------------------------------------------------ Google Drive

_FILE_ID = _str("The ID of the file")


def _gd(
    name: str,
    description: str,
    properties: dict[str, Schema] | None = None,
    required: tuple[str, ...] = (),
    *,
    read_only: bool | None = None,
) -> types.Tool:
    return _tool("gdrive", name, description, properties, required, read_only=read_only)


GDRIVE = (
    _gd(
        "gdrive_search",
        "Search for files in Google Drive",
        {
            "query": _str("Search query"),
            "pageToken": _str("Token for the next page of results"),
            "pageSize": _int("Number of results per page (max 100)"),
        },
        ("query",),
        read_only=True,
    ),
    _gd(
        "gdrive_read_file",
        "Read contents of a file from Google Drive",
        {"fileId": _str("ID of the file to read")},
        ("fileId",),
        read_only=True,
    ),
    _gd(
        "gdrive_list_folder",
        "List the files and subfolders in a Google Drive folder",
        {
            "folderId": _str("ID of the folder ('root' for My Drive)"),
            "pageToken": _str("Token for the next page of results"),
        },
        ("folderId",),
        read_only=True,
    ),
    _gd(
        "gdrive_get_file_metadata",
        "Get metadata for a Google Drive file: name, MIME type, owners, size, "
        "created and modified times, web link",
        {"fileId": _FILE_ID},
        ("fileId",),
        read_only=True,
    ),
    _gd(
        "gdrive_create_file",
        "Create a new file in Google Drive with text content",
        {
            "name": _str("Name of the new file"),
            "content": _str("Text content of the file"),
            "mimeType": _str("MIME type of the file"),
            "parentFolderId": _str("ID of the folder to create it in"),
        },
        ("name", "content"),
    ),
    _gd(
        "gdrive_upload_file",
        "Upload a local file to Google Drive",
        {
            "localPath": _str("Path of the local file to upload"),
            "name": _str("Name in Drive (defaults to the local file name)"),
            "parentFolderId": _str("ID of the destination folder"),
        },
        ("localPath",),
    ),
    _gd(
        "gdrive_create_folder",
        "Create a new folder in Google Drive",
        {
            "name": _str("Folder name"),
            "parentFolderId": _str("ID of the parent folder"),
        },
        ("name",),
    ),
    _gd(
        "gdrive_move_file",
        "Move a file or folder to another folder in Google Drive",
        {"fileId": _FILE_ID, "newParentId": _str("ID of the destination folder")},
        ("fileId", "newParentId"),
    ),
    _gd(
        "gdrive_copy_file",
        "Make a copy of a Google Drive file",
        {"fileId": _FILE_ID, "name": _str("Name of the copy")},
        ("fileId",),
    ),
    _gd(
        "gdrive_rename_file",
        "Rename a file or folder in Google Drive",
        {"fileId": _FILE_ID, "newName": _str("The new name")},
        ("fileId", "newName"),
    ),
    _gd(
        "gdrive_trash_file",
        "Move a file or folder to the trash",
        {"fileId": _FILE_ID},
        ("fileId",),
    ),
    _gd(
        "gdrive_share_file",
        "Share a file with a user, group or domain by adding a permission",
        {
            "fileId": _FILE_ID,
            "emailAddress": _str("Email address of the user or group"),
            "role": _str(
                "Permission role", enum=["reader", "commenter", "writer", "owner"]
            ),
            "sendNotification": _bool("Send a notification email"),
        },
        ("fileId", "emailAddress", "role"),
    ),
    _gd(
        "gdrive_list_permissions",
        "List who has access to a file and with which role",
        {"fileId": _FILE_ID},
        ("fileId",),
        read_only=True,
    ),
    _gd(
        "gdrive_export_file",
        "Export a Google Docs, Sheets or Slides file to another format such as "
        "PDF, DOCX, XLSX or CSV",
        {
            "fileId": _FILE_ID,
            "mimeType": _str("Target MIME type, e.g. 'application/pdf'"),
        },
        ("fileId", "mimeType"),
        read_only=True,
    ),
    _gd(
        "gdrive_list_revisions",
        "List the revisions (version history) of a file",
        {"fileId": _FILE_ID},
        ("fileId",),
        read_only=True,
    ),
    _gd(
        "gdrive_list_comments",
        "List the comments on a Google Drive file, with replies",
        {"fileId": _FILE_ID, "includeResolved": _bool("Include resolved comments")},
        ("fileId",),
        read_only=True,
    ),
    _gd(
        "gsheets_read",
        "Read data from a Google Spreadsheet with flexible options for ranges and "
        "formatting",
        {
            "spreadsheetId": _str("The ID of the spreadsheet to read"),
            "ranges": _arr(
                "Optional array of A1 notation ranges like ['Sheet1!A1:B10']. If "
                "not provided, reads entire sheet."
            ),
            "sheetId": _int("Optional specific sheet ID to read."),
        },
        ("spreadsheetId",),
        read_only=True,
    ),
    _gd(
        "gsheets_update_cell",
        "Update a cell value in a Google Spreadsheet",
        {
            "fileId": _str("ID of the spreadsheet"),
            "range": _str("Cell range in A1 notation (e.g. 'Sheet1!A1')"),
            "value": _str("New cell value"),
        },
        ("fileId", "range", "value"),
    ),
    _gd(
        "gdocs_create_document",
        "Create a new Google Doc",
        {
            "title": _str("Title of the document"),
            "content": _str("Initial text content"),
            "parentFolderId": _str("ID of the folder to create it in"),
        },
        ("title",),
    ),
    _gd(
        "gdocs_append_text",
        "Append text to the end of a Google Doc",
        {"documentId": _str("ID of the document"), "text": _str("Text to append")},
        ("documentId", "text"),
    ),
)

# ------------------------------------------------------------------ Jira

_ISSUE_KEY = _str("Jira issue key (e.g., 'PROJ-123')")


def _ji(
    name: str,
    description: str,
    properties: dict[str, Schema] | None = None,
    required: tuple[str, ...] = (),
    *,
    read_only: bool | None = None,
) -> types.Tool:
    return _tool(
        "jira", f"jira_{name}", description, properties, required, read_only=read_only
    )


JIRA = (
    _ji(
        "get_issue",
        "Get details of a specific Jira issue including its Epic links and "
        "relationship information.",
        {
            "issue_key": _ISSUE_KEY,
            "fields": _str("Comma-separated list of fields to return"),
            "expand": _str("Fields to expand, e.g. 'renderedFields', 'changelog'"),
            "comment_limit": _int("Maximum number of comments to include"),
        },
        ("issue_key",),
        read_only=True,
    ),
    _ji(
        "search",
        "Search Jira issues using JQL (Jira Query Language).",
        {
            "jql": _str(
                "JQL query string. Examples: 'project = PROJ AND status = \"In "
                "Progress\"', 'assignee = currentUser() AND issuetype = Bug', "
                "'created >= -7d'"
            ),
            "fields": _str("Comma-separated fields to return in the results"),
            "limit": _int("Maximum number of results (1-50)"),
            "start_at": _int("Starting index for pagination (0-based)"),
        },
        ("jql",),
        read_only=True,
    ),
    _ji(
        "get_project_issues",
        "Get all issues for a specific Jira project.",
        {
            "project_key": _str("The project key"),
            "limit": _int("Maximum number of results (1-50)"),
            "start_at": _int("Starting index for pagination (0-based)"),
        },
        ("project_key",),
        read_only=True,
    ),
    _ji(
        "create_issue",
        "Create a new Jira issue with optional Epic link or parent for subtasks.",
        {
            "project_key": _str("The JIRA project key (e.g. 'PROJ', 'DEV')"),
            "summary": _str("Summary/title of the issue"),
            "issue_type": _str(
                "Issue type (e.g. 'Task', 'Bug', 'Story', 'Epic', 'Subtask')"
            ),
            "assignee": _str("Assignee's user identifier (email, display name)"),
            "description": _str("Issue description"),
            "components": _str("Comma-separated list of component names"),
            "additional_fields": _obj(
                "Additional fields to set",
                {
                    "priority": _obj("Priority", {"name": _str("Priority name")}),
                    "labels": _arr("Labels"),
                    "parent": _str("Parent issue key, for subtasks"),
                },
            ),
        },
        ("project_key", "summary", "issue_type"),
    ),
    _ji(
        "batch_create_issues",
        "Create multiple Jira issues in a batch.",
        {
            "issues": _str(
                "JSON array of issue objects. Each object should contain: "
                "project_key, summary, issue_type, description, assignee, components"
            ),
            "validate_only": _bool("If true, only validates the issues"),
        },
        ("issues",),
    ),
    _ji(
        "update_issue",
        "Update an existing Jira issue including changing status, adding Epic "
        "links, updating fields, etc.",
        {
            "issue_key": _ISSUE_KEY,
            "fields": _obj(
                "A dictionary of fields to update",
                {
                    "summary": _str("New summary"),
                    "description": _str("New description"),
                    "assignee": _str("New assignee"),
                    "priority": _obj("Priority", {"name": _str("Priority name")}),
                    "labels": _arr("Labels"),
                },
            ),
            "attachments": _str("Comma-separated list of file paths to attach"),
        },
        ("issue_key", "fields"),
    ),
    _ji(
        "delete_issue",
        "Delete an existing Jira issue.",
        {"issue_key": _ISSUE_KEY},
        ("issue_key",),
    ),
    _ji(
        "add_comment",
        "Add a comment to a Jira issue.",
        {"issue_key": _ISSUE_KEY, "comment": _str("Comment text in Markdown format")},
        ("issue_key", "comment"),
    ),
    _ji(
        "get_transitions",
        "Get available status transitions for a Jira issue.",
        {"issue_key": _ISSUE_KEY},
        ("issue_key",),
        read_only=True,
    ),
    _ji(
        "transition_issue",
        "Transition a Jira issue to a new status.",
        {
            "issue_key": _ISSUE_KEY,
            "transition_id": _str("ID of the transition to perform"),
            "fields": _obj(
                "Fields to update during the transition",
                {"resolution": _obj("Resolution", {"name": _str("Resolution name")})},
            ),
            "comment": _str("Comment to add during the transition"),
        },
        ("issue_key", "transition_id"),
    ),
    _ji(
        "add_worklog",
        "Add a worklog entry to a Jira issue.",
        {
            "issue_key": _ISSUE_KEY,
            "time_spent": _str(
                "Time spent in Jira format. Examples: '1h 30m', '1d', '30m', '4h'"
            ),
            "comment": _str("Optional comment for the worklog in Markdown format"),
            "started": _str("Optional start time in ISO format"),
        },
        ("issue_key", "time_spent"),
    ),
    _ji(
        "get_worklog",
        "Get worklog entries for a Jira issue.",
        {"issue_key": _ISSUE_KEY},
        ("issue_key",),
        read_only=True,
    ),
    _ji(
        "link_to_epic",
        "Link an existing issue to an epic.",
        {
            "issue_key": _str("The key of the issue to link (e.g., 'PROJ-123')"),
            "epic_key": _str("The key of the epic to link to (e.g., 'PROJ-456')"),
        },
        ("issue_key", "epic_key"),
    ),
    _ji(
        "get_epic_issues",
        "Get all issues linked to a specific epic.",
        {
            "epic_key": _str("The key of the epic (e.g., 'PROJ-123')"),
            "limit": _int("Maximum number of issues to return (1-50)"),
        },
        ("epic_key",),
        read_only=True,
    ),
    _ji(
        "create_issue_link",
        "Create a link between two Jira issues.",
        {
            "link_type": _str(
                "The type of link to create (e.g., 'Duplicate', 'Blocks', 'Relates to')"
            ),
            "inward_issue_key": _str("The key of the inward issue"),
            "outward_issue_key": _str("The key of the outward issue"),
        },
        ("link_type", "inward_issue_key", "outward_issue_key"),
    ),
    _ji(
        "get_agile_boards",
        "Get jira agile boards by name, project key, or type.",
        {
            "board_name": _str("The name of board, support fuzzy search"),
            "project_key": _str("Jira project key"),
            "board_type": _str("The type of jira board (e.g., 'scrum', 'kanban')"),
        },
        read_only=True,
    ),
    _ji(
        "get_board_issues",
        "Get all issues linked to a specific board filtered by JQL.",
        {
            "board_id": _str("The id of the board (e.g., '1001')"),
            "jql": _str("JQL query string to filter the board's issues"),
            "limit": _int("Maximum number of results (1-50)"),
        },
        ("board_id", "jql"),
        read_only=True,
    ),
    _ji(
        "get_sprints_from_board",
        "Get jira sprints from board by state.",
        {
            "board_id": _str("The id of board (e.g., '1000')"),
            "state": _str("Sprint state (e.g., 'active', 'future', 'closed')"),
        },
        ("board_id",),
        read_only=True,
    ),
    _ji(
        "get_sprint_issues",
        "Get jira issues from sprint.",
        {
            "sprint_id": _str("The id of sprint (e.g., '10001')"),
            "fields": _str("Comma-separated fields to return"),
        },
        ("sprint_id",),
        read_only=True,
    ),
    _ji(
        "create_sprint",
        "Create Jira sprint for a board.",
        {
            "board_id": _str("The id of board (e.g., '1000')"),
            "sprint_name": _str("Name of the sprint (e.g., 'Sprint 1')"),
            "start_date": _str("Start time for sprint (ISO 8601 format)"),
            "end_date": _str("End time for sprint (ISO 8601 format)"),
            "goal": _str("Goal of the sprint"),
        },
        ("board_id", "sprint_name", "start_date", "end_date"),
    ),
    _ji(
        "get_user_profile",
        "Retrieve profile information for a specific Jira user.",
        {
            "user_identifier": _str(
                "Identifier for the user (e.g., email address, username, account ID)"
            )
        },
        ("user_identifier",),
        read_only=True,
    ),
    _ji(
        "get_all_projects",
        "Get all Jira projects accessible to the current user.",
        {"include_archived": _bool("Whether to include archived projects")},
        read_only=True,
    ),
    _ji(
        "search_fields",
        "Search Jira fields by keyword with fuzzy match.",
        {
            "keyword": _str(
                "Keyword for fuzzy search. If left empty, lists the "
                "first 'limit' available fields."
            ),
            "limit": _int("Maximum number of results"),
        },
        read_only=True,
    ),
    _ji(
        "download_attachments",
        "Download attachments from a Jira issue.",
        {
            "issue_key": _ISSUE_KEY,
            "target_dir": _str("Directory where attachments should be saved"),
        },
        ("issue_key", "target_dir"),
    ),
)

# ------------------------------------------------------------------ Sentry

_ORG = _str(
    "The organization's slug. You can find a existing list of "
    "organizations you have access to using the `find_organizations()` "
    "tool."
)
_REGION = _str("The region URL for the organization you're querying, if known.")
_PROJECT_SLUG = _str("The project's slug.")


def _se(
    name: str,
    description: str,
    properties: dict[str, Schema] | None = None,
    required: tuple[str, ...] = ("organizationSlug",),
    *,
    read_only: bool | None = None,
) -> types.Tool:
    return _tool(
        "sentry",
        name,
        description,
        {"organizationSlug": _ORG, "regionUrl": _REGION, **(properties or {})},
        required,
        read_only=read_only,
    )


SENTRY = (
    _tool(
        "sentry",
        "whoami",
        "Identify the authenticated user in Sentry. Use this tool when you need "
        "to know the current user's name or email address.",
        read_only=True,
    ),
    _tool(
        "sentry",
        "find_organizations",
        "Find organizations that the user has access to in Sentry. Use this tool "
        "when you need to find your Sentry organization slug.",
        read_only=True,
    ),
    _se(
        "find_teams",
        "Find teams in an organization in Sentry.",
        read_only=True,
    ),
    _se(
        "find_projects",
        "Find projects in Sentry. Use this tool when you need to view projects in "
        "a Sentry organization or find a project's slug.",
        read_only=True,
    ),
    _se(
        "find_releases",
        "Find releases in Sentry. Use this tool when you need to find the most "
        "recent releases in Sentry or check what version was deployed.",
        {
            "projectSlug": _PROJECT_SLUG,
            "query": _str("Search for versions which contain the provided string."),
        },
        read_only=True,
    ),
    _se(
        "get_issue_details",
        "Get detailed information about a specific Sentry issue by ID. Use this "
        "tool when you need to investigate a specific production error, access "
        "detailed error information and stacktraces from Sentry.",
        {
            "issueId": _str("The Issue ID. e.g. `PROJECT-1Z43`"),
            "eventId": _str("The ID of a specific event"),
            "issueUrl": _str(
                "The URL of the issue. e.g. "
                "https://my-organization.sentry.io/issues/PROJECT-1Z43"
            ),
        },
        (),
        read_only=True,
    ),
    _se(
        "get_trace_details",
        "Get detailed information about a specific Sentry trace by ID. Use this "
        "tool when you need to investigate a distributed trace: its spans, "
        "transactions and timing.",
        {"traceId": _str("The trace ID (32 hex characters)")},
        ("organizationSlug", "traceId"),
        read_only=True,
    ),
    _se(
        "get_event_attachment",
        "Download attachments from a Sentry event. Use this tool when you need to "
        "download a specific attachment by ID or list all attachments for an "
        "event.",
        {
            "projectSlug": _PROJECT_SLUG,
            "eventId": _str("The ID of the event."),
            "attachmentId": _str("The ID of the attachment to download."),
        },
        ("organizationSlug", "projectSlug", "eventId"),
        read_only=True,
    ),
    _se(
        "update_issue",
        "Update an issue's status or assignment in Sentry. This allows you to "
        "resolve, ignore, or reassign issues.",
        {
            "issueId": _str("The Issue ID. e.g. `PROJECT-1Z43`"),
            "status": _str(
                "The new status for the issue",
                enum=["resolved", "resolvedInNextRelease", "unresolved", "ignored"],
            ),
            "assignedTo": _str("The assignee in format 'user:ID' or 'team:ID'"),
        },
        (),
    ),
    _se(
        "search_events",
        "Search for events in Sentry using natural language queries and get "
        "counts and aggregations: error counts, performance metrics, log "
        "messages.",
        {
            "naturalLanguageQuery": _str(
                "Natural language description of what you want to search for"
            ),
            "projectSlug": _PROJECT_SLUG,
            "limit": _int("Maximum number of results to return"),
        },
        ("organizationSlug", "naturalLanguageQuery"),
        read_only=True,
    ),
    _se(
        "search_issues",
        "Search for grouped issues/problems in Sentry - returns a list of issues, "
        "not individual events. Use this for listing unresolved errors, the most "
        "frequent problems, or issues assigned to someone.",
        {
            "naturalLanguageQuery": _str(
                "Natural language description of issues to search for"
            ),
            "projectSlugOrId": _str("The project's slug or numeric ID"),
            "limit": _int("Maximum number of issues to return"),
        },
        ("organizationSlug", "naturalLanguageQuery"),
        read_only=True,
    ),
    _se(
        "search_issue_events",
        "Search and filter events within a specific issue using natural language "
        "queries: events from a time range, an environment, a release or a user.",
        {
            "issueId": _str("The issue ID (e.g., 'MCP-41')"),
            "naturalLanguageQuery": _str("Natural language description of events"),
            "limit": _int("Maximum number of events to return"),
        },
        ("organizationSlug", "issueId", "naturalLanguageQuery"),
        read_only=True,
    ),
    _se(
        "create_team",
        "Create a new team in Sentry.",
        {"name": _str("The name of the team to create.")},
        ("organizationSlug", "name"),
    ),
    _se(
        "create_project",
        "Create a new project in Sentry (includes DSN automatically). Use this "
        "tool when you need to create a new project and get its DSN.",
        {
            "teamSlug": _str("The team's slug."),
            "name": _str("The name of the project to create."),
            "platform": _str("The platform for the project, e.g. python, javascript"),
        },
        ("organizationSlug", "teamSlug", "name"),
    ),
    _se(
        "update_project",
        "Update project settings in Sentry, such as name, slug, platform, and team "
        "assignment.",
        {
            "projectSlug": _PROJECT_SLUG,
            "name": _str("The new name for the project"),
            "slug": _str("The new slug for the project"),
            "platform": _str("The platform for the project"),
            "teamSlug": _str("The team to assign this project to"),
        },
        ("organizationSlug", "projectSlug"),
    ),
    _se(
        "create_dsn",
        "Create an additional DSN for an EXISTING project. Use this tool when you "
        "need to create a new DSN for a specific project.",
        {"projectSlug": _PROJECT_SLUG, "name": _str("The name of the DSN.")},
        ("organizationSlug", "projectSlug", "name"),
    ),
    _se(
        "find_dsns",
        "List all Sentry DSNs for a specific project. Use this tool when you need "
        "to retrieve a Sentry DSN for a project, or configure an SDK.",
        {"projectSlug": _PROJECT_SLUG},
        ("organizationSlug", "projectSlug"),
        read_only=True,
    ),
    _se(
        "analyze_issue_with_seer",
        "Use Seer to analyze production errors and get detailed root cause "
        "analysis with specific code fixes. Use this tool when the user wants to "
        "know why an error is happening or how to fix it.",
        {
            "issueId": _str("The Issue ID. e.g. `PROJECT-1Z43`"),
            "issueUrl": _str("The URL of the issue."),
            "instruction": _str("Optional custom instruction for the analysis"),
        },
        (),
        read_only=True,
    ),
    _tool(
        "sentry",
        "search_docs",
        "Search Sentry documentation for SDK setup, instrumentation, and "
        "configuration guidance.",
        {
            "query": _str("The search query in natural language."),
            "guide": _str("Optional guide filter, e.g. 'python/django'"),
        },
        ("query",),
        read_only=True,
    ),
    _tool(
        "sentry",
        "get_doc",
        "Fetch the full markdown content of a Sentry documentation page.",
        {"path": _str("The documentation path, e.g. '/platforms/python/'")},
        ("path",),
        read_only=True,
    ),
)

SERVERS: dict[str, tuple[types.Tool, ...]] = {
    "github": GITHUB,
    "gitlab": GITLAB,
    "slack": SLACK,
    "linear": LINEAR,
    "filesystem": FILESYSTEM,
    "postgres": POSTGRES,
    "playwright": PLAYWRIGHT,
    "gdrive": GDRIVE,
    "jira": JIRA,
    "sentry": SENTRY,
}
"""Each fake server's tools, by server name (the exposed names' prefix)."""

TOOLS: tuple[types.Tool, ...] = tuple(
    tool for tools in SERVERS.values() for tool in tools
)
"""All 200 tools, as the gateway would list them."""

QUERIES: tuple[tuple[str, str], ...] = (
    # GitHub
    (
        "open a bug about the login crash in the backend repo on GitHub",
        "github__create_issue",
    ),
    ("merge PR 42 on GitHub now that CI is green", "github__merge_pull_request"),
    (
        "what changed in pull request 118? show me the diff",
        "github__get_pull_request_diff",
    ),
    ("approve dana's pull request", "github__create_pull_request_review"),
    ("did the last GitHub Actions run on main fail?", "github__list_workflow_runs"),
    # GitLab
    (
        "open a merge request from feature/auth into main",
        "gitlab__create_merge_request",
    ),
    (
        "why did the GitLab CI job fail? show me its log",
        "gitlab__get_pipeline_job_output",
    ),
    ("rerun the failed pipeline on GitLab", "gitlab__retry_pipeline"),
    ("comment on the GitLab issue that the fix is deployed", "gitlab__create_note"),
    ("which merge requests are waiting for my review", "gitlab__list_merge_requests"),
    # Slack
    ("who posted in #general today", "slack__slack_get_channel_history"),
    ("tell the team in #deploys that the release is out", "slack__slack_post_message"),
    ("react with a thumbs up to Maria's message", "slack__slack_add_reaction"),
    (
        "find the Slack message where someone shared the VPN instructions",
        "slack__slack_search_messages",
    ),
    (
        "remind #standup tomorrow at 9am about the retro",
        "slack__slack_schedule_message",
    ),
    # Linear
    ("what Linear issues are assigned to me", "linear__list_my_issues"),
    ("file a Linear ticket for the onboarding flow redesign", "linear__create_issue"),
    ("which git branch should I use for ENG-512", "linear__get_issue_git_branch_name"),
    ("what's planned in the platform team's current cycle", "linear__list_cycles"),
    ("set the priority of the Linear issue to urgent", "linear__update_issue"),
    # filesystem
    ("show me what's in the src folder", "filesystem__list_directory"),
    ("replace the port number in config.yaml", "filesystem__edit_file"),
    ("rename notes.txt to notes-old.txt", "filesystem__move_file"),
    ("find all the .env files under the project", "filesystem__search_files"),
    ("how big is build.log and when was it last modified", "filesystem__get_file_info"),
    # Postgres
    ("which queries are slowest on the database", "postgres__get_top_queries"),
    ("what columns does the users table have", "postgres__get_object_details"),
    ("run SQL to count signups per day", "postgres__execute_sql"),
    (
        "suggest indexes to speed up our database workload",
        "postgres__analyze_workload_indexes",
    ),
    (
        "is anything blocked waiting on a lock in postgres right now",
        "postgres__list_locks",
    ),
    # Playwright
    (
        "go to https://staging.example.com/login in the browser",
        "playwright__browser_navigate",
    ),
    ("take a screenshot of the page", "playwright__browser_take_screenshot"),
    ("click the Sign in button", "playwright__browser_click"),
    ("fill in the signup form with test data", "playwright__browser_fill_form"),
    (
        "check the browser console for JavaScript errors",
        "playwright__browser_console_messages",
    ),
    # Google Drive
    ("find the Q3 planning doc in Google Drive", "gdrive__gdrive_search"),
    (
        "share the budget spreadsheet with alice@example.com",
        "gdrive__gdrive_share_file",
    ),
    ("read the numbers in the sales spreadsheet", "gdrive__gsheets_read"),
    (
        "put the revenue total into cell B12 of the forecast sheet",
        "gdrive__gsheets_update_cell",
    ),
    ("download the design spec doc as a PDF", "gdrive__gdrive_export_file"),
    # Jira
    ("move PROJ-123 to Done in Jira", "jira__jira_transition_issue"),
    ("log 2 hours of work on the Jira ticket", "jira__jira_add_worklog"),
    ("what's in the current sprint", "jira__jira_get_sprint_issues"),
    ("search Jira for open bugs assigned to me created this week", "jira__jira_search"),
    ("attach story PROJ-9 to the payments epic", "jira__jira_link_to_epic"),
    # Sentry
    ("show me the stack trace for Sentry issue WEB-1A2", "sentry__get_issue_details"),
    ("which errors happen most often in production this week", "sentry__search_issues"),
    ("mark the Sentry issue resolved now that the fix is out", "sentry__update_issue"),
    ("which version did we deploy last", "sentry__find_releases"),
    (
        "get the DSN for the mobile app project to configure the SDK",
        "sentry__find_dsns",
    ),
)
"""(what an agent asks, the exposed name of the tool that does it)."""
