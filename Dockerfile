# Image for deploy/helm. Build where a Docker engine exists: docker build -t queen-ingress:0.1.0 .
FROM node:20-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json ./
COPY src ./src
COPY test ./test
COPY bench ./bench
RUN npx tsc -p tsconfig.json && npm prune --omit=dev

FROM node:20-bookworm-slim
WORKDIR /app
ENV NODE_ENV=production
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist/src ./dist/src
COPY package.json ./
COPY sql ./sql
USER node
EXPOSE 6632
CMD ["node", "dist/src/main.js"]
