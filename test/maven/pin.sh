#!/usr/bin/env bash
# Writes the SHA-256 of every file a Maven artifact brings at runtime (the artifact and its runtime dependencies,
# as `mvn dependency:copy-dependencies` resolves them) to test/maven/<artifactId>-<version>.sha256, the pins that
# installFromMaven (test/sqs/emulator.ts) checks every download and every cached copy against. Resolves into an
# empty local repository with strict checksums (each file must match the .sha1 Maven Central publishes beside it).
# Run after changing ELASTICMQ_VERSION or DYNAMODB_LOCAL_VERSION; review the diff.
#
#   test/maven/pin.sh org.elasticmq:elasticmq-server_2.13:1.7.1
#   test/maven/pin.sh com.amazonaws:DynamoDBLocal:2.6.1
set -euo pipefail
IFS=: read -r group artifact version <<<"${1:?usage: pin.sh GROUP:ARTIFACT:VERSION}"
[[ -n "$group" && -n "$artifact" && -n "$version" ]] || { echo "usage: pin.sh GROUP:ARTIFACT:VERSION" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat >"$work/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.vault-rollout</groupId>
  <artifactId>$artifact-runtime</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>$group</groupId><artifactId>$artifact</artifactId><version>$version</version></dependency>
  </dependencies>
</project>
POM
mvn -B -q --strict-checksums -Dmaven.repo.local="$work/m2" -f "$work/pom.xml" \
  org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies \
  -DoutputDirectory="$work/out" -DincludeScope=runtime -Dmdep.useRepositoryLayout=true
out="$here/$artifact-$version.sha256"
{
  echo "# $group:$artifact:$version and its runtime dependencies: SHA-256 and path in the Maven repository layout."
  echo "# Written by test/maven/pin.sh; checked by installFromMaven (test/sqs/emulator.ts)."
  (cd "$work/out" && find . -type f ! -name _remote.repositories ! -name 'maven-metadata-*.xml' ! -name '*.lastUpdated' -printf '%P\n' | LC_ALL=C sort | xargs sha256sum)
} >"$out"
echo "$out: $(grep -vc '^#' "$out") files" >&2
